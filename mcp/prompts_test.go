package mcp

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// connectStdio runs p.ServeStdio over in-memory pipes as caller and returns
// the client side.
func connectStdio(t *testing.T, p *Plugin, caller lakegate.Caller, copts *mcpsdk.ClientOptions) *mcpsdk.ClientSession {
	t.Helper()
	st, ct := mcpsdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, st, caller, "") }()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts)
	cs, err := client.Connect(t.Context(), ct, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

func TestStdioCallerAndStatus(t *testing.T) {
	p, eng := newTestPlugin(t, Options{})
	cs := connectStdio(t, p, lakegate.Caller{Subject: "stdio", Roles: []string{"reader"}}, nil)
	if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_tables", Arguments: map[string]any{"database": "shop"}}); err != nil {
		t.Fatal(err)
	}
	if got := eng.lastCaller(); got != "stdio" {
		t.Errorf("caller: got %q, want stdio", got)
	}
	if got := p.Status().Sessions["stdio"]; got != 1 {
		t.Errorf("stdio sessions: got %v, want 1", got)
	}
}

func TestPrompts(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	cs := connectStdio(t, p, lakegate.Caller{Subject: "s"}, nil)
	ctx := t.Context()
	var names []string
	for pr, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, pr.Name)
	}
	slices.Sort(names)
	if want := []string{"analyze_table", "explore_database", "tool-descriptions"}; !slices.Equal(names, want) {
		t.Fatalf("prompts: got %v, want %v", names, want)
	}
	for _, tc := range []struct {
		name     string
		args     map[string]string
		contains string
		wantErr  bool
	}{
		{"tool-descriptions", nil, "list_databases", false},
		{"explore_database", map[string]string{"database": "iot"}, "postgres dialect", false},
		{"explore_database", map[string]string{"database": "nope"}, "", true},
		{"analyze_table", map[string]string{"database": "shop", "table": "orders"}, "orders", false},
		{"analyze_table", map[string]string{"database": "shop"}, "", true},
	} {
		t.Run(tc.name+"/"+tc.args["database"], func(t *testing.T) {
			res, err := cs.GetPrompt(ctx, &mcpsdk.GetPromptParams{Name: tc.name, Arguments: tc.args})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want an error", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != 1 || res.Messages[0].Role != "user" {
				t.Fatalf("got %d messages, want one user message", len(res.Messages))
			}
			if text := res.Messages[0].Content.(*mcpsdk.TextContent).Text; !strings.Contains(text, tc.contains) {
				t.Errorf("text %q: want it to contain %q", text, tc.contains)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	cs := connectStdio(t, p, lakegate.Caller{Subject: "s"}, nil)
	for _, tc := range []struct {
		name string
		ref  *mcpsdk.CompleteReference
		arg  string
		val  string
		ctx  map[string]string
		want []string
	}{
		{"database", &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "explore_database"}, "database", "", nil, []string{"iot", "shop"}},
		{"database prefix", &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "explore_database"}, "database", "S", nil, []string{"shop"}},
		{"table in db", &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "analyze_table"}, "table", "", map[string]string{"database": "iot"}, []string{"devices", "readings"}},
		{"table prefix", &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "analyze_table"}, "table", "r", nil, []string{"readings"}},
		{"template db", &mcpsdk.CompleteReference{Type: "ref/resource", URI: schemaTemplate}, "db", "i", nil, []string{"iot"}},
		{"unknown arg", &mcpsdk.CompleteReference{Type: "ref/prompt", Name: "analyze_table"}, "x", "", nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := &mcpsdk.CompleteParams{Ref: tc.ref, Argument: mcpsdk.CompleteParamsArgument{Name: tc.arg, Value: tc.val}}
			if tc.ctx != nil {
				params.Context = &mcpsdk.CompleteContext{Arguments: tc.ctx}
			}
			res, err := cs.Complete(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Completion.Values, tc.want) {
				t.Errorf("got %v, want %v", res.Completion.Values, tc.want)
			}
		})
	}
}

func TestResourcesPaginationAndListChanged(t *testing.T) {
	p, eng := newTestPlugin(t, Options{PageSize: 2, CatalogInterval: time.Hour})
	changed := make(chan struct{}, 10)
	cs := connectStdio(t, p, lakegate.Caller{Subject: "s"}, &mcpsdk.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcpsdk.ResourceListChangedRequest) { changed <- struct{}{} },
	})
	ctx := t.Context()
	list := func() []string {
		t.Helper()
		var uris []string
		var cursor string
		pages := 0
		for {
			res, err := cs.ListResources(ctx, &mcpsdk.ListResourcesParams{Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, r := range res.Resources {
				uris = append(uris, r.URI)
			}
			if cursor = res.NextCursor; cursor == "" {
				break
			}
		}
		if pages < 2 {
			t.Errorf("pages: got %d, want several with page size 2", pages)
		}
		slices.Sort(uris)
		return uris
	}
	testutil.Eventually(t, 5*time.Second, "the tables registered as resources", func() bool { return len(p.catalog.registered()) == 3 })
	want := []string{databasesURI, schemaURI("iot", "devices"), schemaURI("iot", "readings"), schemaURI("shop", "orders")}
	slices.Sort(want)
	if got := list(); !slices.Equal(got, want) {
		t.Fatalf("resources: got %v, want %v", got, want)
	}
	drain(changed)
	eng.setTables("shop", "orders", "customers")
	p.catalog.sync(ctx)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/resources/list_changed after a new table")
	}
	if got := list(); !slices.Contains(got, schemaURI("shop", "customers")) {
		t.Errorf("after the change: got %v, want shop/customers listed", got)
	}

	res, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: schemaURI("iot", "devices")})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"columns"`) {
		t.Fatalf("read schema: got %+v %v, want the table as JSON", res, err)
	}
	if _, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: schemaURI("iot", "nope")}); err == nil {
		t.Error("read of an unknown table: got no error, want resource not found")
	}
	if res, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: databasesURI}); err != nil || !strings.Contains(res.Contents[0].Text, "shop") {
		t.Errorf("read databases: got %+v %v", res, err)
	}
}

func TestProgressAndLogging(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	var mu sync.Mutex
	var progress []string
	var logs []any
	cs := connectStdio(t, p, lakegate.Caller{Subject: "s"}, &mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcpsdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, r.Params.Message)
		},
		//lint:ignore SA1019 the tool-call log messages go to clients of the 2025 revisions
		LoggingMessageHandler: func(_ context.Context, r *mcpsdk.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, r.Params.Data)
		},
	})
	ctx := t.Context()
	//lint:ignore SA1019 as above
	if err := cs.SetLoggingLevel(ctx, &mcpsdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params := &mcpsdk.CallToolParams{Name: "list_databases", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "progress and a log message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 2 && len(logs) >= 1
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(progress[0], "started") || !strings.Contains(progress[len(progress)-1], "finished") {
		t.Errorf("progress: got %q, want started ... finished", progress)
	}
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
