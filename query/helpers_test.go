package query

import "database/sql"

func sqlOpenRW(path string) (*sql.DB, error) {
	return sql.Open("sqlite", sqliteDSN(path, "_pragma=busy_timeout(5000)"))
}
