package pgkeys_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend/pgstore/pgkeys"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
)

// The concurrent-open test re-runs this test binary as processes that
// open the store: TestMain hands it to openRole when roleEnv is set.
const (
	roleEnv = "PGKEYS_TEST_ROLE"
	urlEnv  = "PGKEYS_TEST_URL"
	atEnv   = "PGKEYS_TEST_AT" // when to open, in Unix nanoseconds, so that the processes start together
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := openRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m))
}

// openRole opens the store of urlEnv twice at once, at the time atEnv
// says, and reads its keys: what a serving process does as it starts.
func openRole(role string) error {
	if role != "open" {
		return fmt.Errorf("unknown role %q", role)
	}
	at, err := strconv.ParseInt(os.Getenv(atEnv), 10, 64)
	if err != nil {
		return err
	}
	time.Sleep(time.Until(time.Unix(0, at)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			s, err := pgkeys.Open(ctx, os.Getenv(urlEnv))
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			_, errs[i] = s.Keys(ctx)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
