package mcp

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/tools"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

func TestTraceErrorKinds(t *testing.T) {
	rpc := []struct {
		name string
		err  error
		want string
	}{
		{"taxonomy in data", unknownToolErr("nope", []string{"run_sql"}), "not_found"},
		{"bare code", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "x"}, "-32602"},
		{"Go error", &lakegate.Error{Kind: lakegate.KindRateLimited, Message: "x"}, "rate_limited"},
		{"deadline", context.DeadlineExceeded, "timeout"},
		{"other", errors.New("x"), "internal"},
	}
	for _, tt := range rpc {
		t.Run(tt.name, func(t *testing.T) {
			if got := rpcErrorKind(tt.err); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	tool := []struct {
		name string
		res  *mcpsdk.CallToolResult
		want string
	}{
		{"errorResult", wire.ErrorResult(&lakegate.Error{Kind: lakegate.KindValidation, Message: "secret"}), "validation_error"},
		{"free text", &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "boom"}}}, "tool_error"},
		{"no content", &mcpsdk.CallToolResult{IsError: true}, "tool_error"},
	}
	for _, tt := range tool {
		t.Run(tt.name, func(t *testing.T) {
			if got := toolErrorKind(tt.res); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTraceParamsMeta(t *testing.T) {
	tests := []struct {
		name string
		req  mcpsdk.Request
		want string
	}{
		{"meta", &mcpsdk.CallToolRequest{Params: &mcpsdk.CallToolParamsRaw{Name: "x", Meta: mcpsdk.Meta{"traceparent": "tp"}}}, "tp"},
		{"no meta", &mcpsdk.CallToolRequest{Params: &mcpsdk.CallToolParamsRaw{Name: "x"}}, ""},
		{"typed nil params", &mcpsdk.CallToolRequest{}, ""},
		{"list", &mcpsdk.ListToolsRequest{Params: &mcpsdk.ListToolsParams{Meta: mcpsdk.Meta{"traceparent": "l"}}}, "l"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := paramsMeta(tt.req)["traceparent"].(string)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// unknownToolErr is the answer to a call of tool name, which is not one
// of names, as the tools' middleware gives it.
func unknownToolErr(name string, names []string) error {
	mw := tools.UnknownTool(func(context.Context) []string { return names })
	_, err := mw(func(context.Context, string, mcpsdk.Request) (mcpsdk.Result, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool " + name} // the SDK's answer
	})(context.Background(), "tools/call", &mcpsdk.CallToolRequest{Params: &mcpsdk.CallToolParamsRaw{Name: name}})
	return err
}
