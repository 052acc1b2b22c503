package mcp

import (
	"context"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// gatedEngine holds the catalog check's table listing until gate closes.
type gatedEngine struct {
	*fakeEngine
	gate chan struct{}
}

func (g *gatedEngine) Tables(ctx context.Context, c lakegate.Caller, db string) ([]query.Table, error) {
	if c.Subject == catalogCaller.Subject {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.fakeEngine.Tables(ctx, c, db)
}

// A slow catalog check holds up no request: calls are answered while it
// runs, and only the first resources/list waits for it, to be complete.
func TestCatalogCheckNeverBlocks(t *testing.T) {
	eng := &gatedEngine{fakeEngine: newFakeEngine(t), gate: make(chan struct{})}
	p, err := New(eng, &Options{Tools: lakegate.DefaultTools, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	cs := connectStdio(t, p, lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleReader}}, nil)

	// The check has started (initialize was traffic) and is held. Well
	// inside checkTimeout, a call must be answered.
	ctx, cancel := context.WithTimeout(t.Context(), checkTimeout/2)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "list_tables", Arguments: map[string]any{"database": "shop"}})
	if err != nil || res.IsError {
		t.Fatalf("call during a held catalog check: %v %v", res, err)
	}
	listed := make(chan []string, 1)
	go func() {
		res, err := cs.ListResources(t.Context(), nil)
		if err != nil {
			listed <- nil
			return
		}
		var uris []string
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		listed <- uris
	}()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping during a held catalog check: %v", err)
	}
	select {
	case uris := <-listed:
		t.Fatalf("resources/list answered before the first check ended: %v", uris)
	default:
	}
	close(eng.gate)
	select {
	case uris := <-listed:
		if len(uris) != 4 { // the databases resource and three tables
			t.Errorf("first resources/list: got %v, want every table", uris)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("resources/list never answered")
	}
}
