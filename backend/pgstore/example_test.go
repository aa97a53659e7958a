package pgstore_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/upstream"
)

// The one process that writes the store copies a node's chain into it and
// serves it. Should it stall past its lease and another writer take the
// store over, it stops copying and serves what that one writes. (Not run:
// it needs a database and a node.)
func ExampleWriter_LeaseLost() {
	ctx := context.Background()
	w, err := pgstore.OpenWriter(ctx, "postgres://blockrpc@127.0.0.1/chain", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	follower, err := upstream.NewFollower(w, upstream.FollowConfig{Endpoint: "http://127.0.0.1:8545"})
	if err != nil {
		log.Fatal(err)
	}
	following, stop := context.WithCancel(ctx)
	go func() {
		<-w.LeaseLost()
		stop()
	}()
	go func() {
		if err := follower.Run(following); err != nil {
			log.Fatal(err) // another chain than the store's
		}
	}()
	handler := blockrpc.NewHandler(blockrpc.NewService(w), blockrpc.WithKeys(blockrpc.NewKeySet(strings.Split(os.Getenv("BLOCKRPC_KEYS"), ",")...)))
	log.Fatal(http.ListenAndServe("127.0.0.1:8645", handler))
}

// Any number of processes serve the store beside its writer, each polling
// the head row for what the writer wrote, and may read from a hot standby.
// (Not run: it needs a database.)
func ExampleOpenReader() {
	r, err := pgstore.OpenReader(context.Background(), "postgres://reader@127.0.0.1/chain", &pgstore.Options{PollInterval: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	handler := blockrpc.NewHandler(blockrpc.NewService(r), blockrpc.WithKeys(blockrpc.NewKeySet(strings.Split(os.Getenv("BLOCKRPC_KEYS"), ",")...)))
	log.Fatal(http.ListenAndServe("127.0.0.1:8645", handler))
}
