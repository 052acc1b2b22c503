package validate

import (
	"slices"
	"strings"
)

// deniedWords are keywords that may not appear anywhere in a query outside
// strings, comments and quoted identifiers: they start statements that write
// data, change the session or the server, or control transactions. A query is
// one SELECT, so none of them has a place in it; INSERT, UPDATE, DELETE and
// MERGE could otherwise hide in a WITH clause. The same word used as a name
// right after "." or AS, or right before ".", is a name and allowed; elsewhere
// a column named like one must be double-quoted ("start").
// Sorted; TestListsSorted checks.
var deniedWords = []string{
	"abort", "alter", "analyse", "analyze", "begin", "call", "checkpoint",
	"comment", "commit", "copy", "create", "deallocate", "declare", "delete",
	"discard", "do", "drop", "execute", "explain", "grant", "import", "insert",
	"listen", "load", "lock", "merge", "notify", "prepare", "refresh", "reindex",
	"reset", "revoke", "rollback", "savepoint", "security", "set", "start",
	"truncate", "unlisten", "update", "vacuum",
}

// deniedFuncNames are functions a query may not call, by exact lower-case
// name. Together with deniedFuncPrefixes they cover functions that sleep, read
// or list server files, change settings, signal or reload the server, write
// or advance sequences, take advisory locks, touch large objects, replication
// or backups, open other connections, or run SQL given as text (which would
// read tables the allow-list never sees). current_setting and currval only
// read and are allowed. Sorted; TestListsSorted checks.
var deniedFuncNames = []string{
	"connectby",                 // tablefunc: reads a table named in a string
	"loread",                    // large objects
	"lowrite",                   // large objects
	"nextval",                   // advances a sequence
	"pg_cancel_backend",         // signals another session
	"pg_config",                 // server build paths
	"pg_current_logfile",        // server file paths
	"pg_current_xact_id",        // assigns a transaction id
	"pg_export_snapshot",        // snapshot export
	"pg_hba_file_rules",         // authentication configuration
	"pg_ident_file_mappings",    // authentication configuration
	"pg_notify",                 // NOTIFY as a function
	"pg_promote",                // promotes a standby
	"pg_reload_conf",            // reloads the configuration
	"pg_rotate_logfile",         // rotates the server log
	"pg_show_all_file_settings", // configuration file contents
	"pg_stat_file",              // server file metadata
	"pg_stat_get_activity",      // other sessions' queries
	"pg_switch_wal",             // forces a WAL switch
	"pg_switch_xlog",            // old name of pg_switch_wal
	"pg_terminate_backend",      // kills another session
	"set_config",                // changes a setting
	"setval",                    // writes a sequence
	"ts_rewrite",                // runs SQL given as text
	"ts_stat",                   // runs SQL given as text
	"xpath_table",               // xml2: runs SQL built from its arguments
}

// deniedFuncPrefixes deny every function whose lower-case name starts with
// one of them. Sorted; TestListsSorted checks.
var deniedFuncPrefixes = []string{
	"crosstab",                 // tablefunc: runs SQL given as text
	"cursor_to_xml",            // reads a cursor; also cursor_to_xmlschema
	"database_to_xml",          // dumps every table
	"dblink",                   // opens connections, runs SQL as text
	"lo_",                      // large objects: lo_import, lo_export, ...
	"pg_advisory",              // advisory locks
	"pg_background",            // pg_background: runs SQL in another process
	"pg_backup_",               // backups
	"pg_copy_",                 // copies replication slots
	"pg_create",                // replication slots, restore points
	"pg_drop",                  // replication slots
	"pg_file_",                 // adminpack: writes, renames, deletes files
	"pg_import",                // pg_import_system_collations
	"pg_log",                   // pg_logical_*, pg_log_*, pg_logdir_ls
	"pg_ls_",                   // lists server directories
	"pg_read_",                 // pg_read_file, pg_read_binary_file
	"pg_replication",           // replication origins and slots
	"pg_sleep",                 // pg_sleep, pg_sleep_for, pg_sleep_until
	"pg_start_backup",          // backups (old name)
	"pg_stat_get_backend",      // other sessions' queries and state
	"pg_stat_reset",            // resets statistics
	"pg_stat_statements_reset", // resets statistics
	"pg_stop_backup",           // backups (old name)
	"pg_try_advisory",          // advisory locks
	"pg_wal_replay_",           // pauses or resumes recovery
	"query_to_xml",             // runs SQL given as text
	"schema_to_xml",            // dumps a schema
	"table_to_xml",             // reads a table named in a string
	"txid_",                    // transaction ids
}

// isDeniedWord reports whether an unquoted word is in deniedWords.
func isDeniedWord(w string) bool {
	_, found := slices.BinarySearch(deniedWords, w)
	return found
}

// isDeniedFunc reports whether a function name (any case) may not be called.
func isDeniedFunc(name string) bool {
	name = strings.ToLower(name)
	if _, found := slices.BinarySearch(deniedFuncNames, name); found {
		return true
	}
	for _, p := range deniedFuncPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isSystemName reports whether a name refers to PostgreSQL's system schemas or
// catalogs (pg_catalog, information_schema, pg_toast and every pg_* name),
// or to lakegate's own ingest key table, which holds other callers' keys.
func isSystemName(name string) bool {
	name = strings.ToLower(name)
	return name == "information_schema" || name == "lakegate_idempotency" || strings.HasPrefix(name, "pg_")
}
