package engine

import (
	"reflect"
	"testing"
)

// TestDigestKeySameComparesEveryField shows that digestKey.same, the
// field-by-field comparison Digests memoizes by, tells apart two keys that
// differ in any one field, so a field added to the key and forgotten in
// same fails here instead of serving a stale digest.
func TestDigestKeySameComparesEveryField(t *testing.T) {
	var a digestKey
	if !a.same(&a) {
		t.Fatal("a key is not the same as itself")
	}
	typ := reflect.TypeOf(a)
	for i := range typ.NumField() {
		b := a
		f := reflect.ValueOf(&b).Elem().Field(i)
		switch f.Kind() {
		case reflect.Uint64:
			reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem().SetUint(1)
		case reflect.Int64, reflect.Int:
			reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem().SetInt(1)
		default:
			t.Fatalf("field %s has kind %v: extend this test", typ.Field(i).Name, f.Kind())
		}
		if a.same(&b) || b.same(&a) {
			t.Errorf("keys differing in %s are the same", typ.Field(i).Name)
		}
	}
}
