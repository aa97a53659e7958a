// ethers v6 against examples/server: a JsonRpcProvider used unchanged (it
// asks eth_chainId first, and batches concurrent calls).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Block, JsonRpcProvider, toQuantity } from 'ethers';
import { Calls, inParallel, load } from './lib.mjs';

const { url, chain } = load();
const provider = new JsonRpcProvider(url);
after(() => provider.destroy());

// ethers reports every payload and answer as a "debug" event.
const calls = new Calls();
provider.on('debug', (event) => {
  if (event.action === 'sendRpcPayload') calls.request(event.payload);
  if (event.action === 'receiveRpcResult') calls.response(event.result);
  if (event.action === 'receiveRpcError') calls.errors.push(event.error);
});

const withTransactions = (txs) => txs.map((tx) => ({ hash: tx.hash, from: tx.from, type: tx.type }));

function checkBlock(b, want) {
  assert.ok(b instanceof Block, `got ${b}`);
  assert.deepEqual(
    { hash: b.hash, number: b.number, parentHash: b.parentHash, length: b.length },
    { hash: want.hash, number: want.number, parentHash: want.parentHash, length: want.transactions.length });
  assert.deepEqual(b.transactions, want.transactions.map((tx) => tx.hash));
  assert.deepEqual(withTransactions(b.prefetchedTransactions), want.transactions);
  b.prefetchedTransactions.forEach((tx, i) => {
    assert.deepEqual([tx.blockHash, tx.blockNumber, tx.index], [want.hash, want.number, i], `transaction ${i}`);
  });
}

test('eth_chainId: the network', async () => {
  const network = await provider.getNetwork();
  assert.equal(network.chainId, BigInt(chain.chainId));
});

test('getBlock(n, true): every block', async (t) => {
  const failures = await inParallel(chain.blocks, (b) => `block ${b.number}`, async (want) => {
    checkBlock(await provider.getBlock(want.number, true), want);
  });
  assert.deepEqual(failures, []);
  const txs = chain.blocks.reduce((n, b) => n + b.transactions.length, 0);
  t.diagnostic(`checked: ${chain.name} ethers getBlock(n, true): ${chain.blocks.length} blocks, ${txs} transactions (hash, from, type)`);
});

test('getBlock(hash, true): the head and the side-chain block', async () => {
  checkBlock(await provider.getBlock(chain.byNumber.get(chain.latest).hash, true), chain.byNumber.get(chain.latest));
  if (chain.side) {
    checkBlock(await provider.getBlock(chain.side.hash, true), chain.side);
  }
});

test('tags: latest, earliest, safe, finalized', async () => {
  for (const tag of ['latest', 'earliest', 'safe', 'finalized']) {
    const b = await provider.getBlock(tag);
    assert.deepEqual([b.number, b.hash], [chain[tag], chain.byNumber.get(chain[tag]).hash], tag);
  }
  assert.equal(await provider.getBlockNumber(), chain.latest);
});

const withUncles = chain.blocks.filter((b) => b.uncles.length > 0);

// ethers has no uncle call: the raw answer goes through the formatting
// getBlock uses, provider._wrapBlock (formatBlock, then new Block).
test('eth_getUncleByBlockHashAndIndex: ethers needs a transactions array', { skip: withUncles.length === 0 && 'no uncles' }, async () => {
  const network = await provider.getNetwork();
  const raw = await provider.send('eth_getUncleByBlockHashAndIndex', [withUncles[0].hash, '0x0']);
  // An uncle is a block without transactions (as go-ethereum serves it too);
  // ethers' formatBlock maps over value.transactions unconditionally.
  assert.equal('transactions' in raw, false);
  assert.throws(() => provider._wrapBlock(raw, network),
    { name: 'TypeError', message: "Cannot read properties of undefined (reading 'map')" });
});

test('eth_getUncleByBlockHashAndIndex: every uncle, with transactions: [] added', { skip: withUncles.length === 0 && 'no uncles' }, async (t) => {
  const network = await provider.getNetwork();
  const failures = await inParallel(withUncles, (b) => `block ${b.number}`, async (b) => {
    for (const [i, want] of b.uncles.entries()) {
      const raw = await provider.send('eth_getUncleByBlockHashAndIndex', [b.hash, toQuantity(i)]);
      const u = provider._wrapBlock({ ...raw, transactions: [] }, network);
      assert.ok(u instanceof Block);
      assert.deepEqual({ hash: u.hash, number: u.number }, want, `uncle ${i}`);
    }
    assert.equal(await provider.send('eth_getUncleByBlockHashAndIndex', [b.hash, toQuantity(b.uncles.length)]), null);
  });
  assert.deepEqual(failures, []);
  const n = withUncles.reduce((n, b) => n + b.uncles.length, 0);
  t.diagnostic(`checked: ${chain.name} ethers uncles: ${n} uncles of ${withUncles.length} blocks`);
});

if (chain.pending) {
  // The pending block's number is null: ethers requires a number.
  test('pending block: ethers rejects the null number', async () => {
    for (const full of [true, false]) {
      await assert.rejects(provider.getBlock('pending', full), (err) => {
        assert.equal(err.code, 'BAD_DATA');
        assert.match(err.shortMessage, /^invalid value for value\.number \(invalid numeric value \(argument="value", value=null,/);
        assert.deepEqual([err.value.hash, err.value.number, err.value.nonce, err.value.logsBloom], [null, null, null, null]);
        return true;
      }, `getBlock("pending", ${full})`);
    }
  });

  // With a number the same answer parses: the null hash, nonce and
  // logsBloom are fine, as they are in go-ethereum's pending block (which
  // nulls the hash, nonce and miner, and keeps the number).
  test('pending block: parses once it has a number', async () => {
    const network = await provider.getNetwork();
    const raw = await provider.send('eth_getBlockByNumber', ['pending', true]);
    const want = chain.pending;
    const b = provider._wrapBlock({ ...raw, number: toQuantity(want.number) }, network);
    assert.deepEqual([b.hash, b.number, b.parentHash], [null, want.number, want.parentHash]);
    assert.deepEqual(withTransactions(b.prefetchedTransactions), want.transactions);
    for (const tx of b.prefetchedTransactions) {
      assert.deepEqual([tx.blockHash, tx.blockNumber], [null, null]);
    }
  });
} else {
  test('pending block: none, getBlock gives null', async () => {
    assert.equal(await provider.getBlock('pending', true), null);
  });
}

test('every method ethers called is served, without errors', (t) => {
  t.diagnostic(`checked: ${chain.name} ethers called ${calls.summary()}`);
  assert.deepEqual(calls.unserved(), []);
  assert.deepEqual(calls.errors, []);
});
