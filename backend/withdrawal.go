package backend

// Withdrawal is an EIP-4895 validator withdrawal from the consensus layer.
type Withdrawal struct {
	Index          uint64
	ValidatorIndex uint64
	Address        Address
	Amount         uint64 // in Gwei
}

func (wd *Withdrawal) appendRLP(w *rlpWriter) {
	mark := w.list()
	w.uint64(wd.Index)
	w.uint64(wd.ValidatorIndex)
	w.bytes(wd.Address[:])
	w.uint64(wd.Amount)
	w.endList(mark)
}

func (wd *Withdrawal) appendObject(dst []byte) []byte {
	dst = appendUint64Member(append(dst, '{'), `"index":`, wd.Index)
	dst = appendUint64Member(dst, `"validatorIndex":`, wd.ValidatorIndex)
	dst = appendBytesMember(dst, `"address":`, wd.Address[:])
	dst = appendUint64Member(dst, `"amount":`, wd.Amount)
	return closeObject(dst)
}

// MarshalJSON implements json.Marshaler.
func (wd Withdrawal) MarshalJSON() ([]byte, error) {
	return wd.appendObject(nil), nil
}
