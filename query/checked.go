package query

import (
	"sync"
)

// checkedCache remembers statements the validator accepted, so that a
// statement seen again (the same point query with other parameters, the
// builder's same shape) is not lexed and parsed again. A key names the
// text and everything the validator's answer depends on besides: the
// caller's server-information policy and table list. Only acceptances
// are kept: a refusal is checked again, and explains itself again.
//
// It holds at most maxChecked keys of at most maxCheckedLen bytes (2 MiB
// in all), in two generations: a key is looked for in both, and when the
// current one is full it becomes the previous one, whose keys not used
// since go.
type checkedCache struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
}

const (
	maxChecked    = 1024
	maxCheckedLen = 2048
)

// seen reports whether key was accepted before, keeping it current.
func (c *checkedCache) seen(key string) bool {
	if len(key) > maxCheckedLen {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[key]; ok {
		return true
	}
	if _, ok := c.prev[key]; ok {
		c.addLocked(key)
		return true
	}
	return false
}

// add records that key was accepted.
func (c *checkedCache) add(key string) {
	if len(key) > maxCheckedLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(key)
}

func (c *checkedCache) addLocked(key string) {
	if c.cur == nil {
		c.cur = make(map[string]struct{}, maxChecked/2)
	}
	if len(c.cur) >= maxChecked/2 {
		c.prev, c.cur = c.cur, make(map[string]struct{}, maxChecked/2)
	}
	c.cur[key] = struct{}{}
}
