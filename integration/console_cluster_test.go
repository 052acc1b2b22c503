package integration

import (
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/lakegate/lakegate/host"
)

// TestConsoleCluster drives the console in Chromium through a round-robin
// balancer in front of three replicas: the overview shows the cluster's
// figures on every refresh, whichever replica answers; a replica chosen
// stays shown while the refreshes land on the others; when it stops, the
// page says so and shows the cluster again.
func TestConsoleCluster(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("Chromium is not installed (Debian: apt-get install chromium); this test drives it")
	}
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 3)
	lb := startBalancer(t, ps[0].base, ps[1].base, ps[2].base)
	b := openBrowser(t, chromium)
	admin, agent := token("ops", "admin"), token("agent", "reader")
	// Two SSE sessions: each lives on the replica its stream reached, and
	// stopping another replica ends neither (a Streamable HTTP client's
	// stream may pass through any replica, and end with it).
	connectSSE(t, lb.url, agent)
	connectSSE(t, lb.url, agent)

	// A replica that holds neither session: its own view shows none.
	var list struct{ Sessions []host.SessionInfo }
	consoleCall(t, lb.url, "GET", "/console/api/sessions", admin, "", http.StatusOK, &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("sessions: %+v, want the two SSE sessions", list.Sessions)
	}
	var empty *proc
	var prefix string
	for _, p := range ps {
		m := prefixLine.FindStringSubmatch(p.stderr.String())
		if m == nil {
			t.Fatalf("no prefix in the log of %s", p.base)
		}
		if !slices.ContainsFunc(list.Sessions, func(s host.SessionInfo) bool { return strings.HasPrefix(s.ID, m[1]) }) {
			empty, prefix = p, m[1]
		}
	}

	// refreshed clicks the overview's tab, which refreshes the page shown
	// at once (each refresh lands on the next replica), and checks what
	// the refresh shows: #overview-updated, cleared first, is the last
	// thing a refresh writes. With the polls held back (below), only the
	// click can refresh it.
	refreshed := func(t *testing.T, what, shows, active string) {
		t.Helper()
		evalJS[chromedp.Void](t, b, `document.querySelector("#overview-updated").textContent = ""`)
		b.click(t, "#nav-overview")
		b.waitJS(t, what+" refreshed", `document.querySelector("#overview-updated").textContent !== ""`)
		if got := evalJS[string](t, b, `document.querySelector("#overview-updated").textContent`); !strings.Contains(got, shows) {
			t.Errorf("%s: #overview-updated %q, want it to say %q", what, got, shows)
		}
		if got := evalJS[string](t, b, `document.querySelector("#sessions-active").textContent`); got != active {
			t.Errorf("%s: %s active sessions, want %s", what, got, active)
		}
	}

	t.Run("cluster", func(t *testing.T) {
		b.do(t, "open /console", chromedp.Navigate(lb.url+"/console"))
		b.signIn(t, admin)
		b.waitText(t, "#whoami", "ops · admin")
		b.waitJS(t, "the cluster's view", `document.querySelector("#overview-updated").textContent.includes("cluster of 3 replicas")`)
		b.waitText(t, "#sessions-active", "2")
		b.waitJS(t, "#replicas lists 3 replicas", `document.querySelectorAll("#replicas tbody tr[data-replica]").length === 3`)
		b.shot(t, "overview-cluster")
		// From here the overview's polls are held back: a timer of its
		// period (5 s) set from now on is dropped (others run: chromedp's
		// own waits are timers too), and the poll already set lands once.
		// Every refresh after that is a click's.
		evalJS[chromedp.Void](t, b, `(st => { window.setTimeout = (f, ms, ...a) => ms === 5000 ? 0 : st(f, ms, ...a) })(window.setTimeout)`)
		evalJS[chromedp.Void](t, b, `document.querySelector("#overview-updated").textContent = ""`)
		b.waitJS(t, "the poll already set to land", `document.querySelector("#overview-updated").textContent !== ""`)
		for i := range 3 {
			refreshed(t, fmt.Sprintf("cluster, refresh %d", i+1), "cluster of 3 replicas", "2")
		}
	})

	t.Run("one replica", func(t *testing.T) {
		b.fill(t, "#overview-replica", prefix)
		b.waitJS(t, "replica "+prefix+"'s view", fmt.Sprintf(`document.querySelector("#overview-updated").textContent.includes(%s)`, jsString("replica "+prefix)))
		b.waitText(t, "#sessions-active", "0")
		if evalJS[bool](t, b, `document.querySelector("#replicas-card").checkVisibility()`) {
			t.Error("a replica's view shows the Replicas table")
		}
		for i := range 3 {
			refreshed(t, fmt.Sprintf("replica %s, refresh %d", prefix, i+1), "replica "+prefix, "0")
		}
		b.shot(t, "overview-replica")
	})

	t.Run("the replica stops", func(t *testing.T) {
		if err := empty.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-empty.done
		lb.awaitUp(t, 2)
		b.click(t, "#nav-overview") // the polls are held back
		b.waitJS(t, "the notice that it stopped", fmt.Sprintf(`document.querySelector("#notice").textContent.includes(%s)`, jsString("Replica "+prefix+" does not answer")))
		b.waitJS(t, "the cluster's view", `document.querySelector("#overview-updated").textContent.includes("cluster of 2 replicas")`)
		b.waitText(t, "#sessions-active", "2")
		if got := evalJS[string](t, b, `document.querySelector("#overview-replica").value`); got != "" {
			t.Errorf("the picker shows %q, want the cluster", got)
		}
	})

	t.Run("no errors in the page", func(t *testing.T) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, msg := range b.errs {
			t.Error(msg)
		}
	})
}
