package dpdktest

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestUDP4(t *testing.T) {
	dst := [6]byte{2, 0, 0, 0, 0, 1}
	src := [6]byte{2, 0, 0, 0, 0, 2}
	f := UDP4(dst, src, [4]byte{192, 0, 2, 1}, [4]byte{198, 51, 100, 2}, 1234, 53, []byte("hi"))
	if len(f) != 60 {
		t.Fatalf("len = %d, want the 60-byte minimum", len(f))
	}
	if !bytes.Equal(f[0:6], dst[:]) || !bytes.Equal(f[6:12], src[:]) || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		t.Errorf("bad Ethernet header %x", f[:14])
	}
	if IPv4Checksum(f[14:34]) != 0 { // a valid header sums to 0xffff
		t.Errorf("IPv4 header checksum does not verify: %x", f[14:34])
	}
	if got := binary.BigEndian.Uint16(f[16:]); got != 20+8+2 {
		t.Errorf("IPv4 total length = %d", got)
	}
	if binary.BigEndian.Uint16(f[34:]) != 1234 || binary.BigEndian.Uint16(f[36:]) != 53 ||
		binary.BigEndian.Uint16(f[38:]) != 10 || string(f[42:44]) != "hi" {
		t.Errorf("bad UDP part %x", f[34:])
	}
}
