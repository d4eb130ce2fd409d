package dpdk

// Build flags for the whole package (they apply to shim.c too). DPDK is only
// usable as shared libraries: its poll-mode drivers are plugins loaded by EAL
// from RTE_EAL_PMD_PATH, so vdevs work without linking any driver here.

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lrte_net_ring -lrte_bus_vdev
*/
import "C"
