/*
 * shim.h: the C side of package dpdk.
 *
 * Everything Go needs from DPDK goes through the small helpers declared here.
 * The structs are plain old data with fixed-width fields so that cgo renders
 * them exactly; DPDK's own structs (bitfields, anonymous unions, cache-line
 * alignment) are never read field by field from Go. Every helper that can fail
 * returns -rte_errno (or a negative errno) itself, because rte_errno is
 * thread-local and a second cgo call may run on another thread.
 *
 * This header may contain declarations only (no function or object
 * definitions): it is included from cgo preambles.
 */
#ifndef ILB_DPDK_SHIM_H
#define ILB_DPDK_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

/* LB_MAX_BURST is the rx burst size (Go: MaxBurst). */
#define LB_MAX_BURST 32
/* LB_TX_MAX is the capacity of one per-port tx list (Go: TxListCap). */
#define LB_TX_MAX 64
/* LB_DROP_MAX is the capacity of the drop list. */
#define LB_DROP_MAX 64

/* Field offsets inside struct rte_mbuf, read by Go with unsafe.Add. */
enum {
	LB_OFF_BUF_ADDR = offsetof(struct rte_mbuf, buf_addr),
	LB_OFF_DATA_OFF = offsetof(struct rte_mbuf, data_off),
	LB_OFF_NB_SEGS = offsetof(struct rte_mbuf, nb_segs),
	LB_OFF_PORT = offsetof(struct rte_mbuf, port),
	LB_OFF_OL_FLAGS = offsetof(struct rte_mbuf, ol_flags),
	LB_OFF_PACKET_TYPE = offsetof(struct rte_mbuf, packet_type),
	LB_OFF_PKT_LEN = offsetof(struct rte_mbuf, pkt_len),
	LB_OFF_DATA_LEN = offsetof(struct rte_mbuf, data_len),
	LB_OFF_VLAN_TCI = offsetof(struct rte_mbuf, vlan_tci),
	LB_OFF_RSS = offsetof(struct rte_mbuf, hash.rss),
	LB_OFF_BUF_LEN = offsetof(struct rte_mbuf, buf_len),
};

/* lb_burst carries up to LB_MAX_BURST mbuf pointers by value across cgo,
 * so that Go callers can use stack arrays without them escaping. */
struct lb_burst {
	uint32_t n;
	int32_t rc;
	struct rte_mbuf *m[LB_MAX_BURST];
};

/* lb_txlist is one pending tx list of an lb_io block. */
struct lb_txlist {
	uint16_t n;
	struct rte_mbuf *pkts[LB_TX_MAX];
};

/* lb_io is the per-worker I/O block; it lives in C memory. */
struct lb_io {
	uint16_t nrx;
	uint16_t nports;
	uint16_t ndrop;
	uint64_t tx_dropped;
	struct lb_txlist *tx; /* nports lists, same allocation */
	struct rte_mbuf *rx[LB_MAX_BURST];
	struct rte_mbuf *drop[LB_DROP_MAX];
};

/* lb_port_conf is the flattened port configuration. */
struct lb_port_conf {
	uint16_t nrxq, ntxq, nrxd, ntxd, mtu;
	uint8_t promisc;
	uint8_t rss_key_len;
	uint64_t rss_hf;
	uint8_t rss_key[64];
};

/* Stages of lb_port_setup, reported on failure. */
enum {
	LB_STAGE_INFO = 1,
	LB_STAGE_CONFIGURE,
	LB_STAGE_DESC,
	LB_STAGE_RXQ,
	LB_STAGE_TXQ,
	LB_STAGE_PROMISC,
	LB_STAGE_START,
};

/* lb_port_info is a flattened subset of struct rte_eth_dev_info. */
struct lb_port_info {
	char driver[64];
	uint64_t rss_offloads;
	uint32_t if_index;
	int32_t socket;
	uint16_t max_rxq, max_txq, reta_size, min_mtu, max_mtu, mtu;
	uint8_t hash_key_size;
};

/* lb_link is struct rte_eth_link without bitfields. */
struct lb_link {
	uint32_t speed;
	uint8_t up, full_duplex, autoneg;
};

/* lb_stats is the subset of struct rte_eth_stats the LB reports. */
struct lb_stats {
	uint64_t ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf;
};

/* EAL and lcores. */
int lb_eal_init(int argc, char **argv);
int lb_eal_cleanup(void);
void lb_strerror(int e, char *buf, size_t len);
unsigned lb_main_lcore(void);
unsigned lb_lcore_id(void);
int lb_lcore_socket(unsigned lcore);
int lb_worker_lcores(unsigned *out, int max);
int lb_launch(unsigned lcore, uintptr_t handle);
int lb_lcore_running(unsigned lcore);
int lb_wait_lcore(unsigned lcore);
void lb_wait_all(void);
int lb_thread_register(void);
void lb_thread_unregister(void);

/* Mempools and mbufs. */
struct rte_mempool *lb_pool_create(const char *name, uint32_t n, uint32_t cache,
				   uint16_t data_room, int socket, int *err);
void lb_pool_free(struct rte_mempool *mp);
unsigned lb_pool_avail(const struct rte_mempool *mp);
unsigned lb_pool_in_use(const struct rte_mempool *mp);
struct lb_burst lb_alloc_burst(struct rte_mempool *mp, uint32_t n);
void lb_free_burst(struct lb_burst b);
void lb_free_bulk(struct rte_mbuf **m, unsigned n);
void lb_free_one(struct rte_mbuf *m);

/* Ports. */
int lb_port_setup(uint16_t port, const struct lb_port_conf *c, struct rte_mempool *mp,
		  int *stage);
int lb_port_stop(uint16_t port);
int lb_port_close(uint16_t port);
int lb_port_by_name(const char *name, uint16_t *port);
int lb_port_name(uint16_t port, char *buf, size_t len);
int lb_port_count(void);
int lb_port_list(uint16_t *out, int max);
int lb_port_info(uint16_t port, struct lb_port_info *out);
int lb_port_mac(uint16_t port, uint8_t *mac);
int lb_port_set_mac(uint16_t port, const uint8_t *mac);
int lb_port_link(uint16_t port, struct lb_link *out);
int lb_port_stats(uint16_t port, struct lb_stats *out);
int lb_port_promisc(uint16_t port, int on);

/* Data path. */
struct lb_io *lb_io_new(uint16_t nports);
void lb_io_free(struct lb_io *io);
uint16_t lb_io_run(struct lb_io *io, uint16_t rxport, uint16_t rxq, uint16_t txq);
void lb_io_send(struct lb_io *io, uint16_t txq);

/* Rings. */
struct rte_ring *lb_ring_create(const char *name, uint32_t size, int socket, uint32_t flags,
				int *err);
void lb_ring_free(struct rte_ring *r);
int lb_ring_port(const char *name, struct rte_ring **rx, unsigned int nrx, struct rte_ring **tx,
		 unsigned int ntx, int socket);
int lb_vdev_uninit(const char *name);
uint32_t lb_ring_enq(struct rte_ring *r, struct lb_burst b);
struct lb_burst lb_ring_deq(struct rte_ring *r, uint32_t n);
uint32_t lb_ring_count(const struct rte_ring *r);

#endif /* ILB_DPDK_SHIM_H */
