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

// knownRefusedNames are functions that reach past the data a query reads:
// they take a relation, database or object name (regclass or text), read
// server files, pages or other sessions, signal or reload the server,
// write or advance sequences, take advisory locks, touch large objects,
// replication or backups, open other connections, sleep, or run SQL given
// as text. The allow list (allowedFuncs) is what lets a call through;
// these names are listed so that tests can check that it never holds one
// (TestAllowListKnownRefused) and that the fuzzer can check that no
// accepted statement calls one. Sorted; TestListsSorted checks.
var knownRefusedNames = []string{
	"brin_desummarize_range", "brin_summarize_new_values", "brin_summarize_range",
	"bt_index_check", "bt_index_parent_check", "col_description", "connectby", "currval",
	"format_type", "get_raw_page", "gin_clean_pending_list", "heap_page_items",
	"heap_tuple_infomask_flags", "lastval", "load_extension", "loread", "lowrite", "nextval",
	"obj_description", "page_checksum", "page_header", "pg_backend_pid", "pg_cancel_backend",
	"pg_check_frozen", "pg_check_visible", "pg_config", "pg_current_logfile",
	"pg_current_xact_id", "pg_database_size", "pg_export_snapshot", "pg_filenode_relation",
	"pg_get_functiondef", "pg_get_viewdef", "pg_hba_file_rules", "pg_ident_file_mappings",
	"pg_indexes_size", "pg_notify", "pg_promote", "pg_relation_filenode",
	"pg_relation_filepath", "pg_relation_size", "pg_reload_conf", "pg_relpages",
	"pg_rotate_logfile", "pg_show_all_file_settings", "pg_stat_file", "pg_stat_get_activity",
	"pg_switch_wal", "pg_switch_xlog", "pg_table_size", "pg_tablespace_databases",
	"pg_tablespace_size", "pg_terminate_backend", "pg_total_relation_size", "pg_visibility",
	"pg_visibility_map", "pg_visibility_map_summary", "pgrowlocks", "pgstatginindex",
	"pgstathashindex", "pgstatindex", "pgstattuple", "pgstattuple_approx", "readfile",
	"set_config", "setseed", "setval", "shobj_description", "ts_rewrite", "ts_stat",
	"verify_heapam", "writefile", "xpath_table",
}

// knownRefusedPrefixes are families of knownRefusedNames, by lower-case
// name prefix. Sorted; TestListsSorted checks.
var knownRefusedPrefixes = []string{
	"brin_",           // pageinspect pages; BRIN maintenance writes
	"bt_",             // pageinspect and amcheck: index pages
	"crosstab",        // tablefunc: runs SQL given as text
	"cursor_to_xml",   // reads a cursor; also cursor_to_xmlschema
	"database_to_xml", // dumps every table
	"dblink",          // opens connections, runs SQL as text
	"fsm_",            // pageinspect: free space map pages
	"gin_",            // pageinspect pages; GIN maintenance writes
	"gist_",           // pageinspect: index pages
	"has_",            // has_*_privilege: other objects by name
	"hash_page",       // pageinspect: index pages
	"lo_",             // large objects: lo_import, lo_export, ...
	"pg_advisory",     // advisory locks
	"pg_background",   // pg_background: runs SQL in another process
	"pg_backup_",      // backups
	"pg_copy_",        // copies replication slots
	"pg_create",       // replication slots, restore points
	"pg_drop",         // replication slots
	"pg_file_",        // adminpack: writes, renames, deletes files
	"pg_get_",         // object definitions (pg_get_viewdef, ...), server state
	"pg_import",       // pg_import_system_collations
	"pg_log",          // pg_logical_*, pg_log_*, pg_logdir_ls
	"pg_ls_",          // lists server directories
	"pg_read_",        // pg_read_file, pg_read_binary_file
	"pg_replication",  // replication origins and slots
	"pg_sleep",        // pg_sleep, pg_sleep_for, pg_sleep_until
	"pg_start_backup", // backups (old name)
	"pg_stat_",        // statistics, other sessions, resets
	"pg_stop_backup",  // backups (old name)
	"pg_try_advisory", // advisory locks
	"pg_wal_replay_",  // pauses or resumes recovery
	"query_to_xml",    // runs SQL given as text
	"schema_to_xml",   // dumps a schema
	"table_to_xml",    // reads a table named in a string
	"to_reg",          // to_regclass, to_regproc, ...: objects by name
	"txid_",           // transaction ids
}

// serverInfoFuncNames are functions that read information about the server
// rather than the data: its settings (data_directory, config_file,
// listen_addresses...), version and build, network addresses, the server
// process, start and reload times, tablespace paths, the control file,
// WAL and replication state, memory, installed extensions, and other
// sessions' locks, statements and statistics; for SQLite, its version,
// source id and compile options. They are off the allow list and accepted
// only with Options.ServerInfo. Functions that take a relation or
// database name (pg_relation_filepath, pg_database_size, ...) are not
// here: no option opens them. Sorted; TestListsSorted checks.
var serverInfoFuncNames = []string{
	"current_setting",                      // every setting: paths, addresses, versions
	"fts5_source_id",                       // SQLite FTS5 build
	"inet_client_addr",                     // address lakegate connects from
	"inet_client_port",                     // port lakegate connects from
	"inet_server_addr",                     // database server address
	"inet_server_port",                     // database server port
	"pg_backend_pid",                       // the server process serving lakegate
	"pg_blocking_pids",                     // other sessions' process ids
	"pg_collation_actual_version",          // operating system library versions
	"pg_conf_load_time",                    // configuration reload time
	"pg_current_snapshot",                  // other sessions' transaction ids
	"pg_database_collation_actual_version", // operating system library versions
	"pg_extension_update_paths",            // installed extension versions
	"pg_get_aios",                          // other sessions' I/O
	"pg_get_backend_memory_contexts",       // server memory
	"pg_get_loaded_modules",                // loaded shared libraries
	"pg_get_process_memory_contexts",       // other sessions' memory
	"pg_get_replication_slots",             // replication
	"pg_is_in_backup",                      // backup state
	"pg_is_in_recovery",                    // replication role
	"pg_is_wal_replay_paused",              // replication state
	"pg_lock_status",                       // other sessions' locks
	"pg_postmaster_start_time",             // server start time
	"pg_prepared_xact",                     // other sessions' prepared transactions
	"pg_safe_snapshot_blocking_pids",       // other sessions' process ids
	"pg_settings_get_flags",                // setting flags
	"pg_show_all_settings",                 // every setting (the pg_settings view)
	"pg_show_replication_origin_status",    // replication
	"pg_stat_statements",                   // other sessions' statements (extension)
	"pg_stat_statements_info",              // statement statistics (extension)
	"pg_tablespace_location",               // tablespace directories
	"pg_wal_summary_contents",              // WAL
	"pg_walfile_name",                      // WAL file names
	"pg_walfile_name_offset",               // WAL file names
	"sqlite_source_id",                     // SQLite build
	"sqlite_version",                       // SQLite version
	"version",                              // server version, compiler, platform
}

// serverInfoFuncPrefixes are families of server-information functions, by
// lower-case name prefix. Sorted; TestListsSorted checks.
var serverInfoFuncPrefixes = []string{
	"pg_available_",        // installed extensions, WAL summaries
	"pg_buffercache",       // pg_buffercache: shared buffers of every database
	"pg_control_",          // control file: system identifier, checkpoints
	"pg_current_wal",       // WAL positions
	"pg_get_shmem",         // shared memory
	"pg_get_wal",           // WAL contents (pg_walinspect) and replay state
	"pg_last_",             // replication: received and replayed WAL, last commit
	"pg_stat_get_",         // server statistics and other sessions' state (the pg_stat_* views)
	"pragma_",              // SQLite pragma functions and tables: file paths, compile options, schema
	"sqlite_compileoption", // SQLite compile options
	"ssl_",                 // sslinfo: the connection's certificates and TLS
}

// fieldCallNames are refused functions that take one argument. PostgreSQL's
// field selection calls them without parentheses: x.f and (expr).f mean f(x)
// when x has no column f, so ('data_directory'::text).current_setting, or
// s.current_setting over unnest(ARRAY['data_directory']) s, is
// current_setting('data_directory'), and d.pg_relation_size over a table
// d is pg_relation_size(d). After "." these names are refused as if
// called; other names there stay usable as column names (t.version).
// Sorted; TestListsSorted checks.
var fieldCallNames = []string{
	"brin_metapage_info", "brin_page_type", "brin_summarize_new_values", "bt_index_check",
	"bt_index_parent_check", "bt_metap", "bt_page_items", "crosstab", "crosstab2",
	"crosstab3", "crosstab4", "current_setting", "currval", "dblink", "dblink_cancel_query",
	"dblink_close", "dblink_connect", "dblink_connect_u", "dblink_disconnect",
	"dblink_error_message", "dblink_exec", "dblink_get_notify", "dblink_get_pkey",
	"dblink_get_result", "dblink_is_busy", "gin_clean_pending_list", "gin_metapage_info",
	"gin_page_opaque_info", "gist_page_opaque_info", "hash_metapage_info", "hash_page_type",
	"heap_page_items", "lo_close", "lo_creat", "lo_create", "lo_get", "lo_import", "lo_tell",
	"lo_tell64", "lo_unlink", "nextval", "page_header", "pg_check_frozen", "pg_check_visible",
	"pg_database_size", "pg_get_functiondef", "pg_get_viewdef", "pg_indexes_size",
	"pg_relation_filenode", "pg_relation_filepath", "pg_relation_size", "pg_relpages",
	"pg_table_size", "pg_tablespace_databases", "pg_tablespace_size",
	"pg_total_relation_size", "pg_visibility_map", "pg_visibility_map_summary",
	"pgrowlocks", "pgstatginindex", "pgstathashindex", "pgstatindex", "pgstattuple",
	"pgstattuple_approx", "to_regclass", "to_regcollation", "to_regnamespace", "to_regoper",
	"to_regoperator", "to_regproc", "to_regprocedure", "to_regrole", "to_regtype",
	"to_regtypemod", "ts_stat", "txid_status", "verify_heapam",
}

// regTypes are the object identifier types that look objects up by name:
// 'readings'::regclass tells whether a table exists and hands its oid to
// whatever takes one. A word naming one is refused wherever it appears
// (a cast, CAST(x AS regclass), regclass 'x', (x).regclass). Sorted;
// TestListsSorted checks.
var regTypes = []string{
	"regclass", "regcollation", "regconfig", "regdictionary", "regnamespace", "regoper",
	"regoperator", "regproc", "regprocedure", "regrole", "regtype",
}

// syntaxWords are keywords that a "(" may follow without making them a
// function call: IN (...), EXISTS (...), OVER (...), AS (...), GROUPING
// SETS (...), FILTER (WHERE ...), WITHIN GROUP (...), ARRAY(...), ROW(...),
// VALUES (...), (a, b) OVERLAPS (c, d), COLUMNS (...) in JSON_TABLE, and the
// like. The SQL-standard functions spelled with keywords (CAST, EXTRACT,
// POSITION, SUBSTRING, OVERLAY, TRIM, COALESCE...) are on the allow list
// instead, or are syntax here. Sorted; TestListsSorted checks.
var syntaxWords = []string{
	"all", "and", "any", "array", "as", "asymmetric", "between", "both", "by", "case", "cast",
	"collate", "columns", "cube", "default", "distinct", "else", "escape", "except", "exists",
	"fetch", "filter", "first", "following", "for", "from", "group", "groups", "having",
	"ilike", "in", "intersect", "is", "join", "key", "lateral", "leading", "like", "limit",
	"materialized", "next", "not", "of", "offset", "on", "only", "operator", "or", "order",
	"over", "overlaps", "partition", "passing", "preceding", "range", "recursive",
	"repeatable", "returning", "rollup", "row", "rows", "select", "sets", "similar", "some",
	"symmetric", "then", "to", "trailing", "union", "unique", "using", "value", "values",
	"variadic", "when", "where", "window", "with", "within", "zone",
}

// exprKeywords are keywords after which an expression may start, so that a
// word following one and followed by "(" is a call, never an alias with a
// column list. It holds PostgreSQL's reserved keywords, those that name
// types and functions, and the unreserved ones its grammar lets an
// expression follow; a word missing here would only be read as a call
// (and checked) where it might have been an alias. Sorted;
// TestListsSorted checks.
var exprKeywords = []string{
	"all", "and", "any", "array", "as", "asc", "asymmetric", "at", "between", "both", "by",
	"case", "cast", "check", "collate", "collation", "column", "columns", "constraint",
	"content", "create", "cross", "cube", "current", "current_catalog", "current_date",
	"current_role", "current_schema", "current_time", "current_timestamp", "current_user",
	"default", "desc", "distinct", "do", "document", "else", "empty", "encoding", "end",
	"error", "escape", "except", "exclude", "exists", "extract", "false", "fetch", "filter",
	"first", "following", "for", "foreign", "format", "from", "full", "grant", "group",
	"grouping", "groups", "having", "ilike", "in", "initially", "inner", "interval", "into",
	"is", "isnull", "join", "json", "keep", "key", "keys", "last", "lateral", "leading",
	"left", "like", "limit", "local", "localtime", "localtimestamp", "match", "materialized",
	"name", "natural", "nested", "next", "no", "not", "notnull", "null", "nulls", "of",
	"offset", "omit", "on", "only", "operator", "or", "order", "ordinality", "outer", "over",
	"overlaps", "partition", "passing", "path", "placing", "preceding", "primary",
	"quotes", "range", "recursive", "references", "regexp", "repeatable", "returning",
	"right", "rollup", "row", "rows", "select", "session_user", "sets", "similar", "some",
	"standalone", "symmetric", "system_user", "table", "tablesample", "then", "ties", "time",
	"to", "trailing", "treat", "true", "unbounded", "union", "unique", "unknown", "user",
	"using", "value", "values", "variadic", "verbose", "version", "when", "where", "window",
	"with", "within", "without", "wrapper", "xmlattributes", "zone",
}

// isDeniedWord reports whether an unquoted word is in deniedWords.
func isDeniedWord(w string) bool {
	_, found := slices.BinarySearch(deniedWords, w)
	return found
}

// inSorted reports whether w is in the sorted list.
func inSorted(list []string, w string) bool {
	_, found := slices.BinarySearch(list, w)
	return found
}

// isKnownRefused reports whether a function name (any case) is in
// knownRefusedNames or starts with one of knownRefusedPrefixes.
func isKnownRefused(name string) bool {
	name = strings.ToLower(name)
	if inSorted(knownRefusedNames, name) {
		return true
	}
	for _, p := range knownRefusedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isSystemName reports whether a name refers to PostgreSQL's system schemas or
// catalogs (pg_catalog, information_schema, pg_toast and every pg_* name),
// or to lakegate's own tables: the ingest keys, which hold other callers'
// keys, and a cluster's shared state, which holds the replicas' signing
// key and addresses.
func isSystemName(name string) bool {
	name = strings.ToLower(name)
	switch name {
	case "information_schema", "lakegate_idempotency", "lakegate_cluster_state", "lakegate_cluster_replicas":
		return true
	}
	return strings.HasPrefix(name, "pg_")
}

// isServerInfoFunc reports whether a function name (any case) reads server
// information (serverInfoFuncNames, serverInfoFuncPrefixes). Other
// sessions' query text (pg_stat_get_activity, pg_stat_get_backend_*) is
// not server information: no option opens it.
func isServerInfoFunc(name string) bool {
	name = strings.ToLower(name)
	if name == "pg_stat_get_activity" || strings.HasPrefix(name, "pg_stat_get_backend") {
		return false
	}
	if inSorted(serverInfoFuncNames, name) {
		return true
	}
	for _, p := range serverInfoFuncPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isServerInfoTable reports whether a name used as a table reads server
// information: SQLite's pragma table-valued functions, which need no
// parentheses (FROM pragma_database_list).
func isServerInfoTable(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), "pragma_")
}

// isFieldCall reports whether a name (any case) after "." may call a
// refused function by field selection (fieldCallNames).
func isFieldCall(name string) bool {
	return inSorted(fieldCallNames, strings.ToLower(name))
}

// isRegType reports whether a name (any case) is an object identifier
// type that looks objects up by name (regTypes).
func isRegType(name string) bool {
	return inSorted(regTypes, strings.ToLower(name))
}
