package integration

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// consoleFollow follows device 7's readings on the console's Data page
// (readings chosen) while a row of device 8 and one of device 7 arrive by
// REST ingest: only the latter shows, on top.
func consoleFollow(t *testing.T, b *browserPage, e *env) {
	forgetIngested(t)
	b.click(t, `#tables-list [data-table="readings"]`)
	b.waitJS(t, "#table-detail shows readings", `document.querySelector("#table-detail")?.textContent.includes("temperature")`)
	b.fill(t, "#follow-filters", `[{"column": "device_id", "op": "=", "value": 7}]`)
	b.click(t, "#follow-start")
	status := func(prefix string) {
		b.waitJS(t, "#follow-status starts "+prefix, fmt.Sprintf(`document.querySelector("#follow-status").textContent.startsWith(%s)`, jsString(prefix)))
	}
	status("Following readings · 0 new rows · last look")
	// The newest rows of device 7 are there, and nothing else.
	devices := `[...document.querySelectorAll("#follow-table tbody tr")].map(r => r.cells[1].textContent)`
	if got := evalJS[[]string](t, b, devices); len(got) == 0 || slices.ContainsFunc(got, func(d string) bool { return d != "7" }) {
		t.Fatalf("the newest rows' devices: %v, want device 7's", got)
	}
	ingest := func(id, device int) {
		body := fmt.Sprintf(`[{"id": %d, "device_id": %d, "ts": "2026-01-01T00:00:00Z", "temperature": 20, "humidity": 40, "status": "ok"}]`, id, device)
		if code, out := post(t, e.base+"/data/iot/readings", token("ingest", "writer"), body); code != http.StatusOK {
			t.Fatalf("ingest: %d %s", code, out)
		}
	}
	ingest(200001, 8) // another device's: not shown
	ingest(200002, 7)
	b.waitJS(t, "the new row on top", `document.querySelector("#follow-table tbody tr.fresh")?.cells[0].textContent === "200002"`)
	status("Following readings · 1 new rows · last look")
	if n := evalJS[int](t, b, `document.querySelectorAll("#follow-table tbody tr.fresh").length`); n != 1 {
		t.Errorf("%d fresh rows, want the one of device 7", n)
	}
	b.shot(t, "data-follow")
	b.click(t, "#follow-stop")
	b.waitText(t, "#follow-status", "Stopped.")
	// A filter that is not JSON is refused before any request.
	b.fill(t, "#follow-filters", "device_id = 7")
	b.click(t, "#follow-start")
	b.visible(t, "#follow-error .error-message")
}
