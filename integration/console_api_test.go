package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/host"
)

// The console's transfer routes on PostgreSQL with a block store: who
// sees, downloads and deletes which transfer, and that a download is the
// transfer's bytes.
func TestConsoleTransfersAPI(t *testing.T) {
	e := start(t, envOptions{blocks: &blocktransport.Options{}})
	alice, bob, root := token("alice", "reader"), token("bob", "reader"), token("root", "admin")
	br, _ := export(t, e.connect(t, alice), "SELECT id, name FROM devices ORDER BY id", map[string]any{"export": true})
	id := br.Transfer.ID

	list := func(tok string) []host.TransferInfo {
		var out struct {
			Transfers []host.TransferInfo `json:"transfers"`
		}
		consoleCall(t, e.base, "GET", "/console/api/transfers", tok, "", http.StatusOK, &out)
		return out.Transfers
	}
	if got := list(alice); len(got) != 1 || got[0].ID != id || got[0].Owner != "alice" || got[0].Rows != br.Transfer.Rows || got[0].Blocks < 1 {
		t.Errorf("alice's transfers: %+v, want %s", got, id)
	}
	if got := list(bob); len(got) != 0 {
		t.Errorf("bob sees alice's transfers: %+v", got)
	}
	if got := list(root); len(got) != 1 {
		t.Errorf("the admin's list: %+v", got)
	}

	// Bob cannot download or delete it: to him it does not exist.
	consoleCall(t, e.base, "POST", "/console/api/downloads", bob, `{"transfer":"`+id+`"}`, http.StatusNotFound, nil)
	consoleCall(t, e.base, "DELETE", "/console/api/transfers/"+id, bob, "", http.StatusNotFound, nil)

	// The admin downloads it through a ticket: the transfer's bytes.
	var ticket struct{ URL string }
	consoleCall(t, e.base, "POST", "/console/api/downloads", root, `{"transfer":"`+id+`"}`, http.StatusOK, &ticket)
	resp, err := http.Get(e.base + ticket.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(body)
	if err != nil || resp.StatusCode != http.StatusOK || int64(len(body)) != br.Transfer.Bytes || hex.EncodeToString(sum[:]) != sentSum(resp) ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), id) {
		t.Fatalf("download: %d %v, %d bytes, sha256 %x, want %d bytes and the sum sent, %s", resp.StatusCode, resp.Header, len(body), sum, br.Transfer.Bytes, sentSum(resp))
	}

	// Alice deletes her own; it is gone from the block routes too.
	consoleCall(t, e.base, "DELETE", "/console/api/transfers/"+id, alice, "", http.StatusOK, nil)
	if got := list(alice); len(got) != 0 {
		t.Errorf("after delete: %+v", got)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.base+"/mcp/blocks/"+id, nil)
	if resp, err := httpClient(alice).Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("manifest after delete: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
}

// consoleCall sends one request to base+path with tok and checks its
// status; out, if not nil, gets the JSON answer.
func consoleCall(t *testing.T, base, method, path, tok, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient(tok).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}
