package main

// -keystore: API keys kept as data, made and revoked on the dashboard of the
// admin listener while the server runs, rather than given with -keys.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/blockrpc/blockrpc/backend/pgstore/pgkeys"
	"github.com/blockrpc/blockrpc/keystore"
)

// keystoreSpec is the store -keystore names.
type keystoreSpec struct {
	kind string // "memory", "file" or "postgres"; "" for no -keystore
	path string // a file's
	pg   storeSpec
	name string // what the logs call it: never a URL's password
}

// defaultAdminAddr is where the admin listener goes when -keystore is given
// without -admin: the dashboard needs it, and loopback keeps it local.
const defaultAdminAddr = "127.0.0.1:8546"

// minAdminToken is the shortest admin token the server takes: shorter ones
// can be guessed.
const minAdminToken = 16

func parseKeystore(value string) (keystoreSpec, error) {
	switch {
	case value == "":
		return keystoreSpec{}, nil
	case value == "memory":
		return keystoreSpec{kind: "memory", name: "memory"}, nil
	case strings.HasPrefix(value, "file:"):
		path := strings.TrimPrefix(value, "file:")
		if strings.TrimSpace(path) == "" {
			return keystoreSpec{}, errors.New("-keystore file: names no file: want file:PATH")
		}
		return keystoreSpec{kind: "file", path: path, name: value}, nil
	case strings.HasPrefix(value, "postgres://"), strings.HasPrefix(value, "postgresql://"):
		pg, err := parsePostgres(value)
		if err != nil {
			return keystoreSpec{}, fmt.Errorf("-keystore: %w", err)
		}
		return keystoreSpec{kind: "postgres", pg: pg, name: pg.name}, nil
	}
	return keystoreSpec{}, errors.New("-keystore: want memory, file:PATH, or a postgres:// URL")
}

// open opens the store, and returns what closes it.
func (k keystoreSpec) open(ctx context.Context) (keystore.Store, func(), error) {
	switch k.kind {
	case "memory":
		return keystore.NewMemory(), func() {}, nil
	case "file":
		f, err := keystore.OpenFile(k.path)
		if err != nil {
			return nil, nil, fmt.Errorf("-keystore: %w", err)
		}
		return f, func() {}, nil
	}
	s, err := pgkeys.Open(ctx, k.pg.url)
	if err != nil {
		return nil, nil, k.redact(fmt.Errorf("-keystore %s: %w", k.name, err))
	}
	return s, s.Close, nil
}

// adminToken returns the token of -admin-token or BLOCKRPC_ADMIN_TOKEN, and
// "" when neither is set, which only a loopback admin listener takes: it
// then gets a token generated for the run.
func adminToken(flagValue string, flagSet bool, addr string) (string, error) {
	token, source := flagValue, "-admin-token"
	if !flagSet {
		token, source = os.Getenv("BLOCKRPC_ADMIN_TOKEN"), "BLOCKRPC_ADMIN_TOKEN"
	}
	switch {
	case token == "" && !isLoopback(addr):
		return "", fmt.Errorf("-admin %s is not a loopback address: the dashboard needs an admin token (-admin-token or BLOCKRPC_ADMIN_TOKEN)", addr)
	case token != "" && len(token) < minAdminToken:
		return "", fmt.Errorf("%s: an admin token is at least %d characters", source, minAdminToken)
	}
	return token, nil
}

// isLoopback reports whether addr listens on loopback only: an empty host
// listens everywhere.
func isLoopback(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopbackHost(addr)
}

// openKeys opens the key store of -keystore and the dashboard over it, and
// returns what closes both: the keys' last usage is flushed, then the store
// closed.
func openKeys(ctx context.Context, log *slog.Logger, o options, dash **dashboard) (func(), error) {
	store, closeStore, err := o.keystore.open(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: o.keyRefresh, Stale: o.keyStale, Logger: log})
	if err != nil {
		closeStore()
		return nil, o.keystore.redact(fmt.Errorf("-keystore %s: %w", o.keystore.name, err))
	}
	token, generated := o.adminToken, ""
	if token == "" {
		token = randomHex(16)
		generated = token
	}
	*dash = newDashboard(log, store, keys, token)
	(*dash).generatedToken = generated
	log.Info("keys from a key store", "keystore", o.keystore.name, "refresh", o.keyRefresh)
	return func() {
		if err := keys.Close(); err != nil {
			log.Warn("the last usage of keys could not be written", "err", err)
		}
		closeStore()
	}, nil
}

// redact masks a PostgreSQL URL's password in err.
func (k keystoreSpec) redact(err error) error {
	if k.kind == "postgres" {
		return k.pg.redact(err)
	}
	return err
}

// printDashboard tells where the dashboard is and, when the server made the
// admin token, the token: on the terminal only, never in the log.
func printDashboard(w io.Writer, addr, generatedToken string) {
	fmt.Fprintf(w, "Dashboard (API keys): http://%s/\n", addr)
	if generatedToken != "" {
		fmt.Fprintf(w, "Admin token (generated for this run): %s\n", generatedToken)
	}
}
