package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/lakegate/lakegate/query"
)

// UnknownTool is receiving middleware: a tools/call naming a tool the
// server does not have (names lists those it has, sorted) gets the protocol's answer (JSON-RPC invalid
// params, as the SDK gives and the MCP specification asks), whose message
// names the close tools and lists them all, and whose data is the
// taxonomy's error object (not_found) with the list, so that an agent can
// call again without a tools/list first.
//
// The SDK answers an unknown tool itself, before any tool handler, with
// a bare `unknown tool "x"`; this rewrites that answer, and only for a
// name the plugin did not register (a registered tool's invalid-params
// error, e.g. arguments that fail its schema, passes as it is).
func UnknownTool(names func(ctx context.Context) []string) mcpsdk.Middleware {
	return func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			res, err := next(ctx, method, req)
			var we *jsonrpc.Error
			call, ok := req.(*mcpsdk.CallToolRequest)
			if !ok || call.Params == nil || !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
				return res, err
			}
			names := names(ctx)
			if slices.Contains(names, call.Params.Name) {
				return res, err
			}
			return nil, unknownToolErr(call.Params.Name, names)
		}
	}
}

// FilterRoles is receiving middleware for the tools declared with roles
// (rolesOf: a tool's roles, none for anyone): tools/list shows a caller only the tools
// they may use, and a call of one they may not is answered as for an
// unknown tool, listing theirs (names), so that nothing says it exists.
func FilterRoles(rolesOf func(name string) []string, names func(ctx context.Context) []string) mcpsdk.Middleware {
	return func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			caller, _ := lakegate.CallerFrom(ctx)
			if call, ok := req.(*mcpsdk.CallToolRequest); ok && call.Params != nil && !MayUse(caller, rolesOf(call.Params.Name)) {
				return nil, unknownToolErr(call.Params.Name, names(ctx))
			}
			res, err := next(ctx, method, req)
			if list, ok := res.(*mcpsdk.ListToolsResult); ok && err == nil {
				list.Tools = slices.DeleteFunc(slices.Clone(list.Tools), func(t *mcpsdk.Tool) bool { return !MayUse(caller, rolesOf(t.Name)) })
			}
			return res, err
		}
	}
}

// MayUse reports whether c may use a tool declared with roles (none:
// anyone).
func MayUse(c lakegate.Caller, roles []string) bool {
	return len(roles) == 0 || slices.ContainsFunc(roles, c.HasRole)
}

// unknownToolErr is the answer to a call of tool name, which is not one
// of names.
func unknownToolErr(name string, names []string) error {
	body := struct {
		lakegate.ErrorBody
		Tools []string `json:"tools"`
	}{lakegate.ErrorBody{Kind: lakegate.KindNotFound, Message: fmt.Sprintf("unknown tool %q", wire.Excerpt(name))}, names}
	body.Hint = "available tools: " + strings.Join(names, ", ")
	if dym := query.DidYouMean(name, names); dym != "" {
		body.Hint = dym + " " + body.Hint
	}
	data, _ := json.Marshal(body)
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: body.Message + "; " + body.Hint, Data: data}
}
