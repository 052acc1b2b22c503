package query

import (
	"sync"
	"time"
)

// Plan estimates are cached by SQL text for planTTL, at most planCacheMax.
const (
	planTTL      = 30 * time.Second
	planCacheMax = 1024
)

// planCache keeps size estimates of recent statements.
type planCache struct {
	mu sync.Mutex
	m  map[string]planEntry
}

type planEntry struct {
	at          time.Time
	rows, width float64
}

func (p *planCache) get(db, sqlText string) (rows, width float64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	en, ok := p.m[db+"\x00"+sqlText]
	if !ok || time.Since(en.at) > planTTL {
		return 0, 0, false
	}
	return en.rows, en.width, true
}

func (p *planCache) put(db, sqlText string, rows, width float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= planCacheMax {
		p.m = make(map[string]planEntry)
	}
	p.m[db+"\x00"+sqlText] = planEntry{at: time.Now(), rows: rows, width: width}
}
