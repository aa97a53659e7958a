// Package loadcmp measures blockrpc against go-ethereum serving the same
// chain: both run as their own process on loopback and answer the same
// requests, so the ratio of their timings, taken in one run, says which
// serves blocks faster on this machine.
//
//	make bench-geth
package loadcmp

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/consensus/beacon"
	"github.com/ethereum/go-ethereum/consensus/ethash"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rlp"
)

// Block 1 of the chain holds bigBlockTxs transactions with calldataSize
// bytes of input each: an answer of about 600 KB with full transactions,
// the size of a busy mainnet block.
const (
	bigBlockTxs  = 300
	calldataSize = 900
)

func BenchmarkAgainstGeth(b *testing.B) {
	dir := b.TempDir()
	genesisPath, exportPath := writeChain(b, dir)

	// go-ethereum: the chain imported, served from its database.
	datadir := filepath.Join(dir, "geth")
	gethnode.Exec(b, "init", "--datadir", datadir, genesisPath)
	gethnode.Exec(b, "import", "--datadir", datadir, exportPath)
	geth := gethnode.Start(b, "--datadir", datadir, "--config", gethnode.WriteNoNetworkConfig(b, dir))

	// blockrpc: the example server, serving the same export as a dump.
	ours := startServer(b, dir, genesisPath, exportPath)

	for _, fullTx := range []bool{true, false} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",%t]}`, fullTx)
		kind := map[bool]string{true: "full", false: "hashes"}[fullTx]
		b.Run(kind+"/geth", func(b *testing.B) { load(b, geth.URL, body) })
		b.Run(kind+"/blockrpc", func(b *testing.B) { load(b, ours, body) })
	}
}

// load sends body to url from as many goroutines as there are cores, and
// counts the answer's bytes.
func load(b *testing.B, url, body string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	size := len(post(b, client, url, body))
	if size < 1000 {
		b.Fatalf("%s answered only %d bytes", url, size)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, client, url, body)
		}
	})
}

func post(b *testing.B, client *http.Client, url, body string) []byte {
	resp, err := client.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return data
}

// writeChain generates the chain with go-ethereum and writes its genesis
// and its blocks as `geth export` would.
func writeChain(b *testing.B, dir string) (genesisPath, exportPath string) {
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte("blockrpc load comparison")))
	if err != nil {
		b.Fatal(err)
	}
	// go-ethereum's own development genesis: every fork, the system
	// contracts, the key funded.
	faucet := crypto.PubkeyToAddress(key.PublicKey)
	genesis := core.DeveloperGenesisBlock(60_000_000, &faucet)
	config := genesis.Config
	_, blocks, _ := core.GenerateChainWithGenesis(genesis, beacon.New(ethash.NewFaker()), 2, func(i int, g *core.BlockGen) {
		g.SetParentBeaconRoot(common.Hash{byte(i + 1)})
		count := bigBlockTxs
		if i > 0 {
			count = 3
		}
		for range count {
			g.AddTx(bigTx(b, key, config, g.TxNonce(faucet)))
		}
	})

	genesisPath, exportPath = filepath.Join(dir, "genesis.json"), filepath.Join(dir, "export.rlp")
	data, err := json.Marshal(genesis)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(genesisPath, data, 0o644); err != nil {
		b.Fatal(err)
	}
	var export bytes.Buffer
	for _, block := range blocks {
		if err := rlp.Encode(&export, block); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(exportPath, export.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return genesisPath, exportPath
}

func bigTx(b *testing.B, key *ecdsa.PrivateKey, config *params.ChainConfig, nonce uint64) *types.Transaction {
	data := make([]byte, calldataSize)
	for i := range data {
		data[i] = byte(nonce + uint64(i))
	}
	to := common.HexToAddress("0x000000000000000000000000000000000000dead")
	tx, err := types.SignNewTx(key, types.LatestSigner(config), &types.DynamicFeeTx{
		ChainID: config.ChainID, Nonce: nonce, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(20 * params.GWei),
		Gas: 100_000, To: &to, Data: data,
	})
	if err != nil {
		b.Fatal(err)
	}
	return tx
}

// startServer builds and starts examples/server with a dump of the export,
// and returns its endpoint; it is stopped by its pid when the benchmark
// ends.
func startServer(b *testing.B, dir, genesisPath, exportPath string) string {
	genesis, err := gethconv.ReadGenesis(genesisPath)
	if err != nil {
		b.Fatal(err)
	}
	export, err := os.Open(exportPath)
	if err != nil {
		b.Fatal(err)
	}
	defer export.Close()
	store, err := gethconv.LoadExport(genesis, export)
	if err != nil {
		b.Fatal(err)
	}
	dumpPath := filepath.Join(dir, "dump.jsonl")
	dump, err := os.Create(dumpPath)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Save(dump); err != nil {
		b.Fatal(err)
	}
	dump.Close()

	server := filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-o", server, ".")
	build.Dir = filepath.Join("..", "..", "server") // examples/server, a module of its own
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building examples/server: %v\n%s", err, out)
	}
	var stdout bytes.Buffer
	cmd := exec.Command(server, "-addr", "127.0.0.1:0", "-chain", dumpPath, "-keys", "load")
	cmd.Stdout, cmd.Stderr = &stdout, io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	})
	endpoint := regexp.MustCompile(`JSON-RPC endpoint: (\S+/v3/)<API_KEY>`)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if m := endpoint.FindSubmatch(stdout.Bytes()); m != nil {
			return string(m[1]) + "load" // the key given with -keys, which the server does not print
		}
		if time.Now().After(deadline) {
			b.Fatalf("the server did not start: %s", stdout.Bytes())
		}
	}
}
