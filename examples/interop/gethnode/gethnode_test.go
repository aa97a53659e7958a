package gethnode

import (
	"context"
	"syscall"
	"testing"
)

// TestStartAndStop starts a development node, asks it something, and checks
// that stopping it ends the process.
func TestStartAndStop(t *testing.T) {
	n := Start(t, "--dev", "--dev.period", "0", "--datadir", t.TempDir())
	id, err := n.Call(context.Background(), "eth_chainId")
	if err != nil || string(id) != `"0x539"` {
		t.Fatalf("eth_chainId = %s, %v; want the dev chain's 0x539", id, err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if !n.Exited() {
		t.Fatal("geth still runs after Stop")
	}
	if err := syscall.Kill(n.Pid(), 0); err == nil {
		t.Errorf("process %d still exists", n.Pid())
	}
}
