package backend

import (
	"encoding/json"
)

// AccessTuple is an entry of an EIP-2930 access list.
type AccessTuple struct {
	Address     Address
	StorageKeys []Hash
}

func (w *rlpWriter) accessList(list []AccessTuple) {
	mark := w.list()
	for i := range list {
		item := w.list()
		w.bytes(list[i].Address[:])
		keys := w.list()
		for j := range list[i].StorageKeys {
			w.bytes(list[i].StorageKeys[j][:])
		}
		w.endList(keys)
		w.endList(item)
	}
	w.endList(mark)
}

func appendAccessList(dst []byte, list []AccessTuple) []byte {
	dst = append(dst, `"accessList":[`...)
	for i := range list {
		dst = append(list[i].appendObject(dst), ',')
	}
	return closeArray(dst, len(list))
}

// appendObject writes the tuple as go-ethereum's types.AccessTuple marshals.
func (t *AccessTuple) appendObject(dst []byte) []byte {
	dst = appendBytesMember(append(dst, '{'), `"address":`, t.Address[:])
	dst = append(dst, `"storageKeys":[`...)
	for j := range t.StorageKeys {
		dst = appendHashString(dst, &t.StorageKeys[j])
		dst = append(dst, ',')
	}
	dst = closeArray(dst, len(t.StorageKeys))
	return closeObject(dst)
}

// MarshalJSON implements json.Marshaler, by value as Withdrawal's.
func (t AccessTuple) MarshalJSON() ([]byte, error) {
	return t.appendObject(nil), nil
}

// UnmarshalJSON implements json.Unmarshaler. Both members are required.
func (t *AccessTuple) UnmarshalJSON(input []byte) error {
	var d struct {
		Address     *Address `json:"address"`
		StorageKeys *[]Hash  `json:"storageKeys"`
	}
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	switch {
	case d.Address == nil:
		return &FieldError{Object: "access list entry", Field: "address", Err: ErrMissingField}
	case d.StorageKeys == nil:
		return &FieldError{Object: "access list entry", Field: "storageKeys", Err: ErrMissingField}
	}
	*t = AccessTuple{Address: *d.Address, StorageKeys: *d.StorageKeys}
	return nil
}
