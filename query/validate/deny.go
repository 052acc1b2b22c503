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
// read tables the allow-list never sees). currval only reads and is
// allowed; current_setting reads server settings and is one of the
// server-information functions (serverInfoFuncNames), which Options.ServerInfo
// opens. Sorted; TestListsSorted checks.
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

// serverInfoFuncNames are functions that read information about the server
// rather than the data: its settings (data_directory, config_file,
// listen_addresses...), version and build, network addresses, start and
// reload times, file paths, the control file, WAL and replication state,
// memory, installed extensions, and other sessions' locks, statements and
// statistics; for SQLite, its version, source id and compile options. They
// are accepted only with Options.ServerInfo. What a query runs as
// (current_user, session_user, current_database(), current_schema) is not
// server information: the caller chose the database, its access rule the
// role, and none of them names a path, address, version or other session.
// Functions that read server files or other sessions' query text are in
// deniedFuncNames and stay refused whatever the options. Sorted;
// TestListsSorted checks.
var serverInfoFuncNames = []string{
	"current_setting",                      // every setting: paths, addresses, versions
	"fts5_source_id",                       // SQLite FTS5 build
	"inet_client_addr",                     // address lakegate connects from
	"inet_client_port",                     // port lakegate connects from
	"inet_server_addr",                     // database server address
	"inet_server_port",                     // database server port
	"pg_blocking_pids",                     // other sessions' process ids
	"pg_collation_actual_version",          // operating system library versions
	"pg_conf_load_time",                    // configuration reload time
	"pg_current_snapshot",                  // other sessions' transaction ids
	"pg_database_collation_actual_version", // operating system library versions
	"pg_extension_update_paths",            // installed extension versions
	"pg_filenode_relation",                 // data file names
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
	"pg_relation_filenode",                 // data file names
	"pg_relation_filepath",                 // data file paths
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
// current_setting('data_directory'). After "." these names are refused as
// if called (pg_* names are refused there anyway, as system names). Names
// of zero-argument functions (version) stay usable as column names: t.version.
// Sorted; TestListsSorted checks.
var fieldCallNames = []string{
	"crosstab", "crosstab2", "crosstab3", "crosstab4", "current_setting",
	"dblink", "dblink_cancel_query", "dblink_close", "dblink_connect", "dblink_connect_u",
	"dblink_disconnect", "dblink_error_message", "dblink_exec", "dblink_get_notify",
	"dblink_get_pkey", "dblink_get_result", "dblink_is_busy",
	"lo_close", "lo_creat", "lo_create", "lo_get", "lo_import", "lo_tell", "lo_tell64", "lo_unlink",
	"nextval", "ts_stat", "txid_status",
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
// information (serverInfoFuncNames, serverInfoFuncPrefixes).
func isServerInfoFunc(name string) bool {
	name = strings.ToLower(name)
	if _, found := slices.BinarySearch(serverInfoFuncNames, name); found {
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
	_, found := slices.BinarySearch(fieldCallNames, strings.ToLower(name))
	return found
}
