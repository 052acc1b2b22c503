package mcp

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// Resource URIs.
const (
	databasesURI   = "lakegate://databases"
	schemaTemplate = "lakegate://databases/{db}/tables/{table}/schema"
)

// catalogCaller is who the catalog check lists tables as.
var catalogCaller = lakegate.Caller{Subject: "lakegate-catalog", Roles: []string{lakegate.RoleReader}}

func jsonResource(uri string, v any) (*mcpsdk.ReadResourceResult, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", uri, err)
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{
		{URI: uri, MIMEType: "application/json", Text: string(data)},
	}}, nil
}

func schemaURI(db, table string) string {
	return "lakegate://databases/" + url.PathEscape(db) + "/tables/" + url.PathEscape(table) + "/schema"
}

// parseSchemaURI reads lakegate://databases/{db}/tables/{table}/schema.
func parseSchemaURI(uri string) (db, table string, ok bool) {
	rest, found := strings.CutPrefix(uri, "lakegate://databases/")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != "tables" || parts[3] != "schema" {
		return "", "", false
	}
	db, err1 := url.PathUnescape(parts[0])
	table, err2 := url.PathUnescape(parts[2])
	if err1 != nil || err2 != nil || db == "" || table == "" {
		return "", "", false
	}
	return db, table, true
}
