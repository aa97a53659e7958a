package main

// Where the served chain comes from: a dump or the demo chain in memory,
// the endpoints of -upstream read through the verifying upstream backend,
// the endpoint of -follow copied into memory as it grows, or any of these
// but -upstream in the persistent store of -store (store.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
)

// source is the chain a run serves and what it must stop when the run ends.
type source struct {
	backend backend.Backend
	// store is the chain the server holds, in memory or in a persistent
	// store; nil with -upstream. mem is it when it is in memory.
	store backend.Backend
	mem   *memstore.Store
	// uncleDepth is how far below the head printing the usage may look
	// for a block with an uncle: through an endpoint that would mean a
	// request per block, so only a chain the server holds is searched,
	// its top. 0: not at all.
	uncleDepth uint64
	// up is the upstream backend of -upstream.
	up *upstream.Backend
	// follower copies the chain of -follow into store; failed receives
	// its fatal error, if it stops on one. resumeAt is the latest block
	// of a persistent store that held blocks already, which the follower
	// continues from.
	follower *upstream.Follower
	resumeAt *uint64
	failed   chan error
	stop     context.CancelFunc
	stopped  chan struct{}
	// leaseLost is closed when a PostgreSQL writer finds that another
	// server has taken over writing the store: the follower stops then.
	leaseLost <-chan struct{}
	// A persistent store (-store) and how to close it.
	persistent bool
	spec       storeSpec
	closeStore func() error
	log        *slog.Logger
}

// openSource returns the chain o asks for. With -follow the follower is
// made, not started: startFollowing starts it.
func openSource(ctx context.Context, log *slog.Logger, o options) (*source, error) {
	switch {
	case len(o.upstream) > 0:
		up, err := upstream.Open(ctx, upstream.Config{Endpoints: o.upstream, PollInterval: o.poll, Logger: log})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, errInterrupted
		case err != nil:
			return nil, fmt.Errorf("-upstream: %w", err)
		}
		return &source{backend: up, up: up}, nil
	case o.store.kind != storeMemory:
		return openStore(ctx, log, o)
	case o.follow != "":
		store := memstore.New()
		f, err := upstream.NewFollower(store, upstream.FollowConfig{Endpoint: o.follow, PollInterval: o.poll, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("-follow: %w", err)
		}
		return &source{backend: store, store: store, mem: store, follower: f}, nil
	}
	store, err := loadChainUntil(ctx, log, o)
	if err != nil {
		return nil, err
	}
	return &source{backend: store, store: store, mem: store, uncleDepth: memoryUncleSearchDepth}, nil
}

// startFollowing runs the follower of -follow in the background, until
// close, or until another server takes over writing a PostgreSQL store; a
// fatal error it stops on is sent on failed. It does nothing for the
// other sources.
func (s *source) startFollowing() {
	if s.follower == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop, s.stopped, s.failed = stop, make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(s.stopped)
		if err := s.follower.Run(ctx); err != nil && ctx.Err() == nil {
			s.failed <- err
		}
	}()
	if s.leaseLost != nil {
		// Its writes would all be refused: the other server copies the
		// chain now, and this one serves what that one writes.
		go func() {
			select {
			case <-s.leaseLost:
				stop()
				s.log.Warn("store: another server took over writing it: following stopped, serving what that one writes", s.spec.attrs()...)
			case <-ctx.Done():
			}
		}()
	}
}

// close stops the follower and waits for it, or closes the upstream
// backend, and then closes the persistent store: what serves no request
// any more.
func (s *source) close() {
	if s.stop != nil {
		s.stop()
		<-s.stopped
	}
	if s.up != nil {
		s.up.Close()
	}
	if s.closeStore != nil {
		if err := s.spec.redact(s.closeStore()); err != nil {
			s.log.Error("store: closing it failed", append(s.spec.attrs(), "err", err)...)
		} else {
			s.log.Info("store: closed", s.spec.attrs()...)
		}
		s.closeStore = nil
	}
}

// attrs describes the source for the line the server logs when it starts
// serving; an endpoint is named by its scheme and host only, as a
// provider's URL may hold an API key.
func (s *source) attrs(o options) []any {
	switch {
	case s.up != nil:
		var names []string
		for _, st := range s.up.Status() {
			names = append(names, st.Endpoint)
		}
		return []any{"upstream", strings.Join(names, ",")}
	case s.follower != nil && s.persistent:
		return append([]any{"follow", endpointName(o.follow)}, s.spec.attrs()...)
	case s.follower != nil:
		return []any{"follow", endpointName(o.follow)}
	case s.persistent:
		attrs := s.spec.attrs()
		if o.readOnly {
			attrs = append(attrs, "read_only", true)
		}
		if head, err := s.store.BlockByNumber(context.Background(), backend.Latest); err == nil {
			return append(attrs, "head", head.Number)
		}
		return append(attrs, "head", "none")
	}
	return []any{"blocks", s.mem.Len()}
}

// parseEndpoints splits the comma-separated URLs of a flag and checks that
// each is an http or https URL. An error names a URL by its position only:
// a provider's URL may hold an API key.
func parseEndpoints(flag, list string) ([]string, error) {
	parts := strings.Split(list, ",")
	urls := make([]string, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		switch {
		case p == "":
			return nil, fmt.Errorf("%s: URL %d of %d is empty", flag, i+1, len(parts))
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return nil, fmt.Errorf("%s: URL %d of %d is not an http or https URL", flag, i+1, len(parts))
		}
		urls = append(urls, p)
	}
	return urls, nil
}

// endpointName is what the logs say of an endpoint: its scheme and host,
// without the path, query or user information that may hold a key.
func endpointName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "endpoint"
	}
	return u.Scheme + "://" + u.Host
}

// checkSource checks that the flags name one chain to serve, and only
// what applies to it.
func (o *options) checkSource(set map[string]bool) error {
	named := 0
	for _, name := range []string{"chain", "upstream", "follow"} {
		if set[name] {
			named++
		}
	}
	live := len(o.upstream) > 0 || o.follow != ""
	switch {
	case named > 1:
		return errors.New("-chain, -upstream and -follow each name the chain to serve: give one of them")
	case len(o.upstream) > 0 && o.store.kind != storeMemory:
		return errors.New("-store does not apply to -upstream: the upstream backend reads through the endpoints and keeps its own cache; copy a chain into a store with -follow")
	case o.readOnly && o.store.kind != storePostgres:
		return errors.New("-read-only needs a PostgreSQL store (-store postgres://...): it serves a store that another server writes")
	case o.readOnly && (o.chain != "" || o.follow != ""):
		return errors.New("-read-only serves the store as its writer keeps it: -chain and -follow write, give them to the writer (the same -store without -read-only)")
	case set["store-cache"] && o.store.kind == storeMemory:
		return errors.New("-store-cache applies to a pebble: or postgres:// -store: the memory store holds the whole chain")
	case set["store-compress"] && o.store.kind != storePebble:
		return errors.New("-store-compress applies to a pebble: -store: a PostgreSQL store compresses a block only where that keeps it in its row")
	case o.storeCache < 0 && o.store.kind == storePebble:
		return fmt.Errorf("-store-cache %d: a Pebble store needs a cache: give a size in bytes, or leave the default", o.storeCache)
	case o.poll < 0:
		return fmt.Errorf("-poll %v: must not be negative", o.poll)
	case set["poll"] && !live && !o.readOnly:
		return errors.New("-poll needs -upstream, -follow or -read-only: a dump does not change")
	}
	for _, name := range []string{"safe", "finalized", "chainid"} {
		switch {
		case !set[name]:
		case live:
			return fmt.Errorf("-%s applies to a dump or the demo chain: with -upstream or -follow the endpoint tells it", name)
		case o.readOnly:
			return fmt.Errorf("-%s is written into the store: give it to the writer, not with -read-only", name)
		}
	}
	return nil
}
