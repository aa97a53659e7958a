package blockrpc

import (
	"context"
	"testing"
)

// TestJoinedHookStaysNil joins observers of which none has a Backend
// hook: the joined one has none either, so that the handler does not time
// every Backend call for no one.
func TestJoinedHookStaysNil(t *testing.T) {
	a := &Observer{Call: func(context.Context, CallInfo) {}}
	b := &Observer{Request: func(context.Context, RequestInfo) {}, Cache: func(context.Context, bool) {}}
	var c config
	for _, o := range []*Observer{a, nil, b} {
		WithObserver(o)(&c)
	}
	if j := c.observer; j.Backend != nil || j.Call == nil || j.Request == nil || j.Cache == nil {
		t.Errorf("joined hooks: Call %v, Request %v, Backend %v, Cache %v; want all but Backend",
			j.Call != nil, j.Request != nil, j.Backend != nil, j.Cache != nil)
	}
}
