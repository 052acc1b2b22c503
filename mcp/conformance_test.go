//go:build conformance

package mcp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// The conformance fixtures answer as the suite expects; the suite itself
// runs against the binary in integration/js_test.go.
func TestConformanceFixtures(t *testing.T) {
	p, _ := newTestPlugin(t, Options{Conformance: true})
	cs := connectStdio(t, p, lakegate.Caller{Subject: "c"}, &mcpsdk.ClientOptions{
		//lint:ignore SA1019 the conformance fixtures exercise sampling, which the 2025 revisions have
		CreateMessageHandler: func(context.Context, *mcpsdk.CreateMessageRequest) (*mcpsdk.CreateMessageResult, error) {
			//lint:ignore SA1019 as above
			return &mcpsdk.CreateMessageResult{Content: &mcpsdk.TextContent{Text: "sampled"}, Model: "m", Role: "assistant"}, nil
		},
		ElicitationHandler: func(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			return &mcpsdk.ElicitResult{Action: "decline"}, nil
		},
	})
	ctx := t.Context()
	for _, tc := range []struct {
		tool    string
		args    map[string]any
		isError bool
		want    string // a fragment of the first content's text, or its type
	}{
		{"test_simple_text", nil, false, "simple text response"},
		{"test_image_content", nil, false, "*mcp.ImageContent"},
		{"test_audio_content", nil, false, "*mcp.AudioContent"},
		{"test_embedded_resource", nil, false, "*mcp.EmbeddedResource"},
		{"test_multiple_content_types", nil, false, ""},
		{"test_error_handling", nil, true, ""},
		{"test_tool_with_logging", nil, false, ""},
		{"test_tool_with_progress", nil, false, ""},
		{"test_sampling", map[string]any{"prompt": "hi"}, false, "sampled"},
		{"test_elicitation", map[string]any{"message": "who?"}, false, "decline"},
		{"test_elicitation_sep1034_defaults", nil, false, "decline"},
		{"test_elicitation_sep1330_enums", nil, false, "decline"},
		{"json_schema_2020_12_tool", map[string]any{}, false, ""},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tc.isError || len(res.Content) == 0 {
				t.Fatalf("got isError %v with %d contents, want isError %v and content", res.IsError, len(res.Content), tc.isError)
			}
			got := ""
			if txt, ok := res.Content[0].(*mcpsdk.TextContent); ok {
				got = txt.Text
			} else {
				got = typeName(res.Content[0])
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
	n := 0
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(r.URI, "test://") {
			if _, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: r.URI}); err != nil {
				t.Errorf("read %s: %v", r.URI, err)
			}
			n++
		}
	}
	if n == 0 {
		t.Error("got no test:// fixture resources")
	}
	if _, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: "test://template/7/data"}); err != nil {
		t.Errorf("template resource: %v", err)
	}
	for _, pr := range []struct {
		name string
		args map[string]string
	}{
		{"test_simple_prompt", nil},
		{"test_prompt_with_arguments", map[string]string{"arg1": "a", "arg2": "b"}},
		{"test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://static-text"}},
		{"test_prompt_with_image", nil},
	} {
		res, err := cs.GetPrompt(ctx, &mcpsdk.GetPromptParams{Name: pr.name, Arguments: pr.args})
		if err != nil || len(res.Messages) == 0 {
			t.Errorf("prompt %s: got %v, %v; want messages", pr.name, res, err)
		}
	}
	comp, err := cs.Complete(ctx, &mcpsdk.CompleteParams{
		Ref:      &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcpsdk.CompleteParamsArgument{Name: "arg1", Value: "par"},
	})
	if err != nil || len(comp.Completion.Values) != 3 {
		t.Errorf("completion: got %v, %v; want 3 values", comp, err)
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
