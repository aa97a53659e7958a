// viem v2 against examples/server: createPublicClient with the http
// transport, used unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicClient, formatBlock, http, numberToHex } from 'viem';
import { Calls, inParallel, load, viemTypes } from './lib.mjs';

const { url, chain } = load();

// viem's http transport sends with the global fetch: record what it sends
// and what comes back, without touching the client.
const calls = new Calls();
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  calls.request(JSON.parse(init.body));
  const res = await realFetch(input, init);
  calls.response(await res.clone().json().catch(() => null));
  return res;
};

const client = createPublicClient({ transport: http(url) });

const withTransactions = (txs) => txs.map((tx) => ({ hash: tx.hash, from: tx.from, type: Number(tx.typeHex) }));
const expected = (txs) => txs.map((tx) => ({ ...tx, from: tx.from.toLowerCase() }));

function checkBlock(b, want) {
  assert.deepEqual(
    { hash: b.hash, number: b.number, parentHash: b.parentHash, uncles: b.uncles },
    { hash: want.hash, number: BigInt(want.number), parentHash: want.parentHash, uncles: want.uncles.map((u) => u.hash) });
  assert.deepEqual(withTransactions(b.transactions), expected(want.transactions));
  b.transactions.forEach((tx, i) => {
    assert.deepEqual([tx.type, tx.blockHash, tx.blockNumber, tx.transactionIndex],
      [viemTypes[want.transactions[i].type], want.hash, BigInt(want.number), i], `transaction ${i}`);
  });
}

test('eth_chainId', async () => {
  assert.equal(BigInt(await client.getChainId()), BigInt(chain.chainId));
});

test('getBlock({ blockNumber, includeTransactions: true }): every block', async (t) => {
  const failures = await inParallel(chain.blocks, (b) => `block ${b.number}`, async (want) => {
    checkBlock(await client.getBlock({ blockNumber: BigInt(want.number), includeTransactions: true }), want);
  });
  assert.deepEqual(failures, []);
  const txs = chain.blocks.reduce((n, b) => n + b.transactions.length, 0);
  t.diagnostic(`checked: ${chain.name} viem getBlock({ blockNumber, includeTransactions: true }): ${chain.blocks.length} blocks, ${txs} transactions (hash, from, type)`);
});

test('getBlock({ blockHash, includeTransactions: true }): the head and the side-chain block', async () => {
  const head = chain.byNumber.get(chain.latest);
  checkBlock(await client.getBlock({ blockHash: head.hash, includeTransactions: true }), head);
  if (chain.side) {
    checkBlock(await client.getBlock({ blockHash: chain.side.hash, includeTransactions: true }), chain.side);
  }
});

test('tags: latest, earliest, safe, finalized', async () => {
  for (const tag of ['latest', 'earliest', 'safe', 'finalized']) {
    const b = await client.getBlock({ blockTag: tag });
    assert.deepEqual([b.number, b.hash], [BigInt(chain[tag]), chain.byNumber.get(chain[tag]).hash], tag);
  }
  assert.equal(await client.getBlockNumber({ cacheTime: 0 }), BigInt(chain.latest));
});

const withUncles = chain.blocks.filter((b) => b.uncles.length > 0);

test('eth_getUncleByBlockHashAndIndex: client.request, then formatBlock', { skip: withUncles.length === 0 && 'no uncles' }, async (t) => {
  const failures = await inParallel(withUncles, (b) => `block ${b.number}`, async (b) => {
    for (const [i, want] of b.uncles.entries()) {
      const raw = await client.request({ method: 'eth_getUncleByBlockHashAndIndex', params: [b.hash, numberToHex(i)] });
      const u = formatBlock(raw);
      assert.deepEqual({ hash: u.hash, number: u.number, transactions: u.transactions }, { hash: want.hash, number: BigInt(want.number), transactions: [] }, `uncle ${i}`);
    }
    assert.equal(await client.request({ method: 'eth_getUncleByBlockHashAndIndex', params: [b.hash, numberToHex(b.uncles.length)] }), null);
  });
  assert.deepEqual(failures, []);
  const n = withUncles.reduce((n, b) => n + b.uncles.length, 0);
  t.diagnostic(`checked: ${chain.name} viem uncles: ${n} uncles of ${withUncles.length} blocks`);
});

if (chain.pending) {
  // viem types the pending block's hash, nonce, logsBloom and number as
  // nullable, and formats a null as null.
  test('pending block: parses, with a null hash, nonce, logsBloom and number', async () => {
    const want = chain.pending;
    const b = await client.getBlock({ blockTag: 'pending', includeTransactions: true });
    assert.deepEqual([b.hash, b.nonce, b.logsBloom, b.number, b.parentHash], [null, null, null, null, want.parentHash]);
    assert.deepEqual(withTransactions(b.transactions), expected(want.transactions));
    for (const tx of b.transactions) {
      assert.deepEqual([tx.blockHash, tx.blockNumber], [null, null]);
    }
    const hashes = await client.getBlock({ blockTag: 'pending' });
    assert.deepEqual(hashes.transactions, want.transactions.map((tx) => tx.hash));
  });
} else {
  test('pending block: none, getBlock throws BlockNotFoundError', async () => {
    await assert.rejects(client.getBlock({ blockTag: 'pending' }), { name: 'BlockNotFoundError' });
  });
}

test('every method viem called is served, without errors', (t) => {
  t.diagnostic(`checked: ${chain.name} viem called ${calls.summary()}`);
  assert.deepEqual(calls.unserved(), []);
  assert.deepEqual(calls.errors, []);
});
