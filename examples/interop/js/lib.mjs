// What the client tests share: the server and the expectations the Go test
// (examples/interop/jsclients) computed with go-ethereum, and a record of the
// JSON-RPC methods each client calls.
import { readFileSync } from 'node:fs';

// The methods examples/server serves.
export const served = new Set([
  'eth_chainId',
  'eth_blockNumber',
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getUncleByBlockHashAndIndex',
  'eth_getUncleByBlockNumberAndIndex',
  'eth_getUncleCountByBlockHash',
  'eth_getUncleCountByBlockNumber',
]);

// load returns the server's URL and the expectations. Both come from the Go
// test, which starts the server: run `make interop`, or
// `go test ./jsclients/` in examples/interop.
export function load() {
  const url = process.env.BLOCKRPC_URL;
  const path = process.env.BLOCKRPC_EXPECTATIONS;
  if (!url || !path) {
    throw new Error('BLOCKRPC_URL and BLOCKRPC_EXPECTATIONS are not set: these tests run from the Go test ' +
      'examples/interop/jsclients (cd examples/interop && go test ./jsclients/), which starts the server');
  }
  const chain = JSON.parse(readFileSync(path, 'utf8'));
  chain.byNumber = new Map(chain.blocks.map((b) => [b.number, b]));
  return { url, chain };
}

// The transaction types by number, as viem names them.
export const viemTypes = ['legacy', 'eip2930', 'eip1559', 'eip4844', 'eip7702'];

// Calls records the JSON-RPC methods a client sent and the errors it got.
export class Calls {
  methods = new Map(); // method -> count
  errors = [];

  request(payload) {
    for (const p of [payload].flat()) {
      this.methods.set(p.method, (this.methods.get(p.method) ?? 0) + 1);
    }
  }

  response(result) {
    for (const r of [result].flat()) {
      if (r && r.error) this.errors.push(r.error);
    }
  }

  summary() {
    return [...this.methods].sort().map(([m, n]) => `${m} x${n}`).join(', ');
  }

  unserved() {
    return [...this.methods.keys()].filter((m) => !served.has(m));
  }
}

// inParallel runs check on every item at once, as an application would, and
// returns the failures, one line each.
export async function inParallel(items, name, check) {
  const failures = [];
  await Promise.all(items.map(async (item) => {
    try {
      await check(item);
    } catch (err) {
      failures.push(`${name(item)}: ${err.message}`);
    }
  }));
  return failures;
}
