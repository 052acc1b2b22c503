//go:build conformance

package mcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file holds the fixtures of the MCP conformance suite
// (@modelcontextprotocol/conformance): tools, resources and prompts with
// the fixed names its server scenarios call. They are registered only with
// Options.Conformance (lakegate serve --conformance), which tests use; they
// never touch a database. The build tag keeps them out of the production
// binary: only `-tags conformance` builds have them, and
// conformance_off.go stands in for them otherwise.

// ConformanceFixtures reports whether this build has the MCP conformance
// suite's fixtures, that is whether it was built with -tags conformance.
const ConformanceFixtures = true

// conformanceOptions adds what the fixtures need of the server options:
// resource subscriptions.
func conformanceOptions(o *mcpsdk.ServerOptions) error {
	o.SubscribeHandler = func(context.Context, *mcpsdk.SubscribeRequest) error { return nil }
	o.UnsubscribeHandler = func(context.Context, *mcpsdk.UnsubscribeRequest) error { return nil }
	return nil
}

// conformanceComplete answers completions for the fixture prompt.
func conformanceComplete(req *mcpsdk.CompleteRequest) (*mcpsdk.CompleteResult, bool) {
	if req.Params.Ref == nil || !strings.HasPrefix(req.Params.Ref.Name, "test_") {
		return nil, false
	}
	var values []string
	for _, v := range []string{"paris", "park", "party"} {
		if strings.HasPrefix(v, req.Params.Argument.Value) {
			values = append(values, v)
		}
	}
	if values == nil {
		values = []string{}
	}
	return &mcpsdk.CompleteResult{Completion: mcpsdk.CompletionResultDetails{Values: values, Total: len(values)}}, true
}

// tinyPNG is a 1x1 red pixel.
func tinyPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

// tinyWAV is 10 ms of 8 kHz 8-bit mono silence.
func tinyWAV() []byte {
	const samples = 80
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + samples))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1))    // PCM
	w(uint16(1))    // mono
	w(uint32(8000)) // sample rate
	w(uint32(8000)) // byte rate
	w(uint16(1))    // block align
	w(uint16(8))    // bits per sample
	b.WriteString("data")
	w(uint32(samples))
	b.Write(bytes.Repeat([]byte{128}, samples))
	return b.Bytes()
}

func text(s string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// addConformanceFixtures registers the suite's tools, resources and
// prompts on server, and returns the names of its tools.
func addConformanceFixtures(server *mcpsdk.Server) (toolNames []string) {
	tool := func(name, desc string, schema json.RawMessage, h mcpsdk.ToolHandler) {
		if schema == nil {
			schema = emptySchema
		}
		server.AddTool(&mcpsdk.Tool{Name: name, Description: desc, InputSchema: schema}, h)
		toolNames = append(toolNames, name)
	}
	fixed := func(res *mcpsdk.CallToolResult) mcpsdk.ToolHandler {
		return func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) { return res, nil }
	}
	pic := tinyPNG()
	tool("test_simple_text", "Returns simple text", nil, fixed(text("This is a simple text response for testing.")))
	tool("test_image_content", "Returns an image", nil, fixed(&mcpsdk.CallToolResult{Content: []mcpsdk.Content{
		&mcpsdk.ImageContent{Data: pic, MIMEType: "image/png"}}}))
	tool("test_audio_content", "Returns audio", nil, fixed(&mcpsdk.CallToolResult{Content: []mcpsdk.Content{
		&mcpsdk.AudioContent{Data: tinyWAV(), MIMEType: "audio/wav"}}}))
	tool("test_embedded_resource", "Returns an embedded resource", nil, fixed(&mcpsdk.CallToolResult{Content: []mcpsdk.Content{
		&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}))
	tool("test_multiple_content_types", "Returns text, image and resource", nil, fixed(&mcpsdk.CallToolResult{Content: []mcpsdk.Content{
		&mcpsdk.TextContent{Text: "Multiple content types test:"},
		&mcpsdk.ImageContent{Data: pic, MIMEType: "image/png"},
		&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}}}}))
	tool("test_error_handling", "Always fails", nil, fixed(&mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{
		&mcpsdk.TextContent{Text: "This tool intentionally returns an error for testing"}}}))
	tool("test_tool_with_logging", "Logs three messages", nil, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			//lint:ignore SA1019 the conformance suite's 2025 scenarios test logging
			_ = req.Session.Log(ctx, &mcpsdk.LoggingMessageParams{Level: "info", Logger: "conformance", Data: msg})
		}
		return text("Tool with logging executed successfully"), nil
	})
	tool("test_tool_with_progress", "Reports progress", nil, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		token := req.Params.GetProgressToken()
		for i, n := range []float64{0, 50, 100} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: token, Progress: n, Total: 100})
			}
		}
		return text("Tool with progress executed successfully"), nil
	})
	tool("test_sampling", "Asks the client's LLM", json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`),
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var in struct{ Prompt string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			//lint:ignore SA1019 the conformance suite's 2025 scenarios test sampling
			res, err := req.Session.CreateMessage(ctx, &mcpsdk.CreateMessageParams{MaxTokens: 100,
				//lint:ignore SA1019 as above
				Messages: []*mcpsdk.SamplingMessage{{Role: "user", Content: &mcpsdk.TextContent{Text: in.Prompt}}}})
			if err != nil {
				return nil, err
			}
			reply := ""
			if t, ok := res.Content.(*mcpsdk.TextContent); ok {
				reply = t.Text
			}
			return text("LLM response: " + reply), nil
		})
	elicit := func(message string, schema json.RawMessage) mcpsdk.ToolHandler {
		return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			msg := message
			var in struct{ Message string }
			if json.Unmarshal(req.Params.Arguments, &in) == nil && in.Message != "" {
				msg = in.Message
			}
			res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Message: msg, RequestedSchema: schema})
			if err != nil {
				return nil, err
			}
			content, _ := json.Marshal(res.Content)
			return text(fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, content)), nil
		}
	}
	tool("test_elicitation", "Asks the user", json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
		elicit("", json.RawMessage(`{"type":"object","properties":{"username":{"type":"string","description":"User's response"},"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`)))
	tool("test_elicitation_sep1034_defaults", "Asks with defaults", nil, elicit("Please review your information", json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},"score":{"type":"number","default":95.5},
		"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},"verified":{"type":"boolean","default":true}}}`)))
	tool("test_elicitation_sep1330_enums", "Asks with enums", nil, elicit("Please choose", json.RawMessage(`{"type":"object","properties":{
		"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},
		"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
		"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
		"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},
		"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`)))
	tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},
		"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}`),
		fixed(text("JSON Schema 2020-12 tool called")))

	resource := func(uri, name, mime, txt string, blob []byte) {
		server.AddResource(&mcpsdk.Resource{URI: uri, Name: name, Description: "Conformance fixture " + name, MIMEType: mime},
			func(context.Context, *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
				return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{{URI: uri, MIMEType: mime, Text: txt, Blob: blob}}}, nil
			})
	}
	resource("test://static-text", "static-text", "text/plain", "This is the content of the static text resource.", nil)
	resource("test://static-binary", "static-binary", "image/png", "", pic)
	resource("test://watched-resource", "watched-resource", "text/plain", "Watched resource content.", nil)
	server.AddResourceTemplate(&mcpsdk.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Description: "Conformance fixture template", MIMEType: "application/json"},
		func(_ context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json",
				Text: fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, id, id)}}}, nil
		})

	prompt := func(pr *mcpsdk.Prompt, h mcpsdk.PromptHandler) { server.AddPrompt(pr, h) }
	msgs := func(ms ...*mcpsdk.PromptMessage) *mcpsdk.GetPromptResult {
		return &mcpsdk.GetPromptResult{Messages: ms}
	}
	user := func(c mcpsdk.Content) *mcpsdk.PromptMessage { return &mcpsdk.PromptMessage{Role: "user", Content: c} }
	prompt(&mcpsdk.Prompt{Name: "test_simple_prompt", Description: "A simple prompt"},
		func(context.Context, *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
			return msgs(user(&mcpsdk.TextContent{Text: "This is a simple prompt for testing."})), nil
		})
	prompt(&mcpsdk.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with arguments", Arguments: []*mcpsdk.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
			a := req.Params.Arguments
			return msgs(user(&mcpsdk.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])})), nil
		})
	prompt(&mcpsdk.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt with a resource", Arguments: []*mcpsdk.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
			return msgs(user(&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
				user(&mcpsdk.TextContent{Text: "Please process the embedded resource above."})), nil
		})
	prompt(&mcpsdk.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
		func(context.Context, *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
			return msgs(user(&mcpsdk.ImageContent{Data: pic, MIMEType: "image/png"}),
				user(&mcpsdk.TextContent{Text: "Please analyze the image above."})), nil
		})
	return toolNames
}
