package main

// Where the served chain comes from: a dump or the demo chain in memory,
// the endpoints of -upstream read through the verifying upstream backend,
// or the endpoint of -follow copied into memory as it grows.

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
	// store is the chain in memory, nil with -upstream.
	store *memstore.Store
	// whole is set when store holds the whole chain already (a dump, the
	// demo chain): printing the usage may then look through it for an
	// uncle, which through an endpoint would mean a request per block.
	whole bool
	// up is the upstream backend of -upstream.
	up *upstream.Backend
	// follower copies the chain of -follow into store; failed receives
	// its fatal error, if it stops on one.
	follower *upstream.Follower
	failed   chan error
	stop     context.CancelFunc
	stopped  chan struct{}
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
	case o.follow != "":
		store := memstore.New()
		f, err := upstream.NewFollower(store, upstream.FollowConfig{Endpoint: o.follow, PollInterval: o.poll, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("-follow: %w", err)
		}
		return &source{backend: store, store: store, follower: f}, nil
	}
	store, err := loadChainUntil(ctx, log, o)
	if err != nil {
		return nil, err
	}
	return &source{backend: store, store: store, whole: true}, nil
}

// startFollowing runs the follower of -follow in the background, until
// close; a fatal error it stops on is sent on failed. It does nothing for
// the other sources.
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
}

// close stops the follower and waits for it, or closes the upstream
// backend: what serves no request any more.
func (s *source) close() {
	if s.stop != nil {
		s.stop()
		<-s.stopped
	}
	if s.up != nil {
		s.up.Close()
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
	case s.follower != nil:
		return []any{"follow", endpointName(o.follow)}
	}
	return []any{"blocks", s.store.Len()}
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
	case o.poll < 0:
		return fmt.Errorf("-poll %v: must not be negative", o.poll)
	case set["poll"] && !live:
		return errors.New("-poll needs -upstream or -follow: a dump does not change")
	}
	if live {
		for _, name := range []string{"safe", "finalized", "chainid"} {
			if set[name] {
				return fmt.Errorf("-%s applies to a dump or the demo chain: with -upstream or -follow the endpoint tells it", name)
			}
		}
	}
	return nil
}
