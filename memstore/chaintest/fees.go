package chaintest

import (
	"math/big"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// The fee rules of the forks, as go-ethereum applies them, so that the
// headers carry the values a client would compute.
const (
	initialBaseFee           = 1_000_000_000 // EIP-1559: the London block's base fee
	baseFeeChangeDenominator = 8
	elasticityMultiplier     = 2

	blobGasPerBlob = 1 << 17 // EIP-4844

	// The blob schedule of Cancun (EIP-4844) and Prague (EIP-7691).
	cancunTargetBlobs, cancunMaxBlobs, cancunUpdateFraction = 3, 6, 3_338_477
	pragueTargetBlobs, pragueMaxBlobs, pragueUpdateFraction = 6, 9, 5_007_716
)

// nextBaseFee returns the base fee of a London block whose parent is
// parent (EIP-1559): the initial fee at the fork, then up or down by at
// most an eighth as the parent used more or less than half its gas limit.
func nextBaseFee(parent *backend.Header) *uint256.Int {
	if parent.BaseFeePerGas == nil {
		return uint256.NewInt(initialBaseFee)
	}
	target := parent.GasLimit / elasticityMultiplier
	fee := new(uint256.Int).Set(parent.BaseFeePerGas)
	if target == 0 || parent.GasUsed == target {
		return fee
	}
	var delta uint256.Int
	if parent.GasUsed > target {
		delta.Mul(fee, uint256.NewInt(parent.GasUsed-target))
		delta.Div(&delta, uint256.NewInt(target))
		delta.Div(&delta, uint256.NewInt(baseFeeChangeDenominator))
		if delta.IsZero() {
			delta.SetOne()
		}
		return fee.Add(fee, &delta)
	}
	delta.Mul(fee, uint256.NewInt(target-parent.GasUsed))
	delta.Div(&delta, uint256.NewInt(target))
	delta.Div(&delta, uint256.NewInt(baseFeeChangeDenominator))
	if delta.Gt(fee) {
		return new(uint256.Int)
	}
	return fee.Sub(fee, &delta)
}

// blobSchedule is a fork's target and maximum blobs a block, and the
// fraction that sets how fast the blob base fee moves.
type blobSchedule struct {
	target, max    uint64
	updateFraction uint64
}

// nextExcessBlobGas returns the excess blob gas of a block after parent
// (EIP-4844): what the parent and its own excess used above the target.
func nextExcessBlobGas(parent *backend.Header, s blobSchedule) uint64 {
	var excess, used uint64
	if parent.ExcessBlobGas != nil {
		excess = *parent.ExcessBlobGas
	}
	if parent.BlobGasUsed != nil {
		used = *parent.BlobGasUsed
	}
	target := s.target * blobGasPerBlob
	if excess+used < target {
		return 0
	}
	return excess + used - target
}

// blobBaseFee returns the price of blob gas at the given excess:
// fake_exponential(1, excess, updateFraction) of EIP-4844.
func blobBaseFee(excess uint64, s blobSchedule) *uint256.Int {
	factor, numerator := big.NewInt(1), new(big.Int).SetUint64(excess)
	denominator := new(big.Int).SetUint64(s.updateFraction)
	output := new(big.Int)
	accum := new(big.Int).Mul(factor, denominator)
	for i := int64(1); accum.Sign() > 0; i++ {
		output.Add(output, accum)
		accum.Mul(accum, numerator)
		accum.Div(accum, denominator)
		accum.Div(accum, big.NewInt(i))
	}
	fee, overflow := uint256.FromBig(output.Div(output, denominator))
	if overflow {
		return new(uint256.Int).SetAllOne()
	}
	return fee
}
