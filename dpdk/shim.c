/*
 * shim.c: C helpers for package dpdk. See shim.h for the rules.
 */
#include <errno.h>
#include <string.h>

#include <rte_bus_vdev.h>
#include <rte_common.h>
#include <rte_eth_ring.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "shim.h"
#include "_cgo_export.h"

/* ---- EAL and lcores ---- */

int lb_eal_init(int argc, char **argv)
{
	int rc = rte_eal_init(argc, argv);
	return rc < 0 ? -rte_errno : rc;
}

int lb_eal_cleanup(void)
{
	int rc = rte_eal_cleanup();
	return rc < 0 ? -rte_errno : 0;
}

/* lb_strerror copies the message into buf: rte_strerror may return a
 * thread-local buffer that Go could read from another thread. */
void lb_strerror(int e, char *buf, size_t len)
{
	snprintf(buf, len, "%s", rte_strerror(e));
}

unsigned lb_main_lcore(void) { return rte_get_main_lcore(); }

unsigned lb_lcore_id(void) { return rte_lcore_id(); }

int lb_lcore_socket(unsigned lcore) { return (int)rte_lcore_to_socket_id(lcore); }

int lb_worker_lcores(unsigned *out, int max)
{
	int n = 0;
	unsigned i;

	RTE_LCORE_FOREACH_WORKER(i) {
		if (n < max)
			out[n] = i;
		n++;
	}
	return n;
}

/* lb_lcore_entry is the lcore_function_t; it enters Go exactly once. */
static int lb_lcore_entry(void *arg)
{
	return lbLcoreMain((uintptr_t)arg);
}

int lb_launch(unsigned lcore, uintptr_t handle)
{
	return rte_eal_remote_launch(lb_lcore_entry, (void *)handle, lcore);
}

int lb_lcore_running(unsigned lcore) { return rte_eal_get_lcore_state(lcore) == RUNNING; }

int lb_wait_lcore(unsigned lcore) { return rte_eal_wait_lcore(lcore); }

void lb_wait_all(void) { rte_eal_mp_wait_lcore(); }

int lb_thread_register(void)
{
	if (rte_thread_register() < 0)
		return -rte_errno;
	return (int)rte_lcore_id();
}

void lb_thread_unregister(void) { rte_thread_unregister(); }

/* ---- Mempools and mbufs ---- */

struct rte_mempool *lb_pool_create(const char *name, uint32_t n, uint32_t cache,
				   uint16_t data_room, int socket, int *err)
{
	struct rte_mempool *mp =
		rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
	*err = mp == NULL ? -rte_errno : 0;
	return mp;
}

void lb_pool_free(struct rte_mempool *mp) { rte_mempool_free(mp); }

unsigned lb_pool_avail(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }

unsigned lb_pool_in_use(const struct rte_mempool *mp) { return rte_mempool_in_use_count(mp); }

struct lb_burst lb_alloc_burst(struct rte_mempool *mp, uint32_t n)
{
	struct lb_burst b;

	if (n > LB_MAX_BURST)
		n = LB_MAX_BURST;
	b.rc = rte_pktmbuf_alloc_bulk(mp, b.m, n);
	b.n = b.rc == 0 ? n : 0;
	return b;
}

void lb_free_burst(struct lb_burst b)
{
	if (b.n > LB_MAX_BURST)
		b.n = LB_MAX_BURST;
	rte_pktmbuf_free_bulk(b.m, b.n);
}

void lb_free_bulk(struct rte_mbuf **m, unsigned n) { rte_pktmbuf_free_bulk(m, n); }

void lb_free_one(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

/* ---- Ports ---- */

int lb_port_setup(uint16_t port, const struct lb_port_conf *c, struct rte_mempool *mp,
		  int *stage)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nrxd = c->nrxd, ntxd = c->ntxd, q;
	int socket, rc;

	*stage = LB_STAGE_INFO;
	rc = rte_eth_dev_info_get(port, &info);
	if (rc < 0)
		return rc;

	memset(&conf, 0, sizeof(conf));
	if (c->mtu)
		conf.rxmode.mtu = c->mtu;
	if (c->nrxq > 1) {
		/* Only ask for hash types the device supports: configure fails
		 * otherwise, and virtual devices support few or none. */
		uint64_t hf = c->rss_hf ? c->rss_hf
					: (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
		hf &= info.flow_type_rss_offloads;
		if (hf) {
			conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			conf.rx_adv_conf.rss_conf.rss_hf = hf;
			if (c->rss_key_len) {
				/* configure copies the key, so pointing into c is fine. */
				conf.rx_adv_conf.rss_conf.rss_key = (uint8_t *)c->rss_key;
				conf.rx_adv_conf.rss_conf.rss_key_len = c->rss_key_len;
			}
		}
	}

	*stage = LB_STAGE_CONFIGURE;
	rc = rte_eth_dev_configure(port, c->nrxq, c->ntxq, &conf);
	if (rc < 0)
		return rc;

	*stage = LB_STAGE_DESC;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrxd, &ntxd);
	if (rc < 0)
		return rc;

	socket = rte_eth_dev_socket_id(port);
	if (socket < 0)
		socket = SOCKET_ID_ANY;

	*stage = LB_STAGE_RXQ;
	for (q = 0; q < c->nrxq; q++) {
		rc = rte_eth_rx_queue_setup(port, q, nrxd, socket, NULL, mp);
		if (rc < 0)
			return rc;
	}
	*stage = LB_STAGE_TXQ;
	for (q = 0; q < c->ntxq; q++) {
		rc = rte_eth_tx_queue_setup(port, q, ntxd, socket, NULL);
		if (rc < 0)
			return rc;
	}

	*stage = LB_STAGE_START;
	rc = rte_eth_dev_start(port);
	if (rc < 0)
		return rc;

	if (c->promisc) {
		*stage = LB_STAGE_PROMISC;
		rc = rte_eth_promiscuous_enable(port);
		/* Virtual devices without the op are promiscuous anyway. */
		if (rc < 0 && rc != -ENOTSUP)
			return rc;
	}
	*stage = 0;
	return 0;
}

int lb_port_stop(uint16_t port) { return rte_eth_dev_stop(port); }

int lb_port_close(uint16_t port) { return rte_eth_dev_close(port); }

int lb_port_by_name(const char *name, uint16_t *port)
{
	return rte_eth_dev_get_port_by_name(name, port);
}

int lb_port_name(uint16_t port, char *buf, size_t len)
{
	char name[RTE_ETH_NAME_MAX_LEN];
	int rc = rte_eth_dev_get_name_by_port(port, name);

	if (rc < 0)
		return rc;
	snprintf(buf, len, "%s", name);
	return 0;
}

int lb_port_count(void) { return rte_eth_dev_count_avail(); }

int lb_port_list(uint16_t *out, int max)
{
	int n = 0;
	uint16_t p;

	RTE_ETH_FOREACH_DEV(p) {
		if (n < max)
			out[n] = p;
		n++;
	}
	return n;
}

int lb_port_info(uint16_t port, struct lb_port_info *out)
{
	struct rte_eth_dev_info info;
	uint16_t mtu = 0;
	int rc = rte_eth_dev_info_get(port, &info);

	if (rc < 0)
		return rc;
	memset(out, 0, sizeof(*out));
	snprintf(out->driver, sizeof(out->driver), "%s",
		 info.driver_name ? info.driver_name : "");
	out->rss_offloads = info.flow_type_rss_offloads;
	out->if_index = info.if_index;
	out->socket = rte_eth_dev_socket_id(port);
	out->max_rxq = info.max_rx_queues;
	out->max_txq = info.max_tx_queues;
	out->reta_size = info.reta_size;
	out->min_mtu = info.min_mtu;
	out->max_mtu = info.max_mtu;
	out->hash_key_size = info.hash_key_size;
	if (rte_eth_dev_get_mtu(port, &mtu) == 0)
		out->mtu = mtu;
	return 0;
}

int lb_port_mac(uint16_t port, uint8_t *mac)
{
	struct rte_ether_addr a;
	int rc = rte_eth_macaddr_get(port, &a);

	if (rc < 0)
		return rc;
	memcpy(mac, a.addr_bytes, RTE_ETHER_ADDR_LEN);
	return 0;
}

int lb_port_set_mac(uint16_t port, const uint8_t *mac)
{
	struct rte_ether_addr a;

	memcpy(a.addr_bytes, mac, RTE_ETHER_ADDR_LEN);
	return rte_eth_dev_default_mac_addr_set(port, &a);
}

int lb_port_link(uint16_t port, struct lb_link *out)
{
	struct rte_eth_link l;
	int rc;

	memset(&l, 0, sizeof(l));
	rc = rte_eth_link_get_nowait(port, &l);
	if (rc < 0)
		return rc;
	out->speed = l.link_speed;
	out->up = l.link_status == RTE_ETH_LINK_UP;
	out->full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
	out->autoneg = l.link_autoneg == RTE_ETH_LINK_AUTONEG;
	return 0;
}

int lb_port_stats(uint16_t port, struct lb_stats *out)
{
	struct rte_eth_stats s;
	int rc = rte_eth_stats_get(port, &s);

	if (rc < 0)
		return rc;
	out->ipackets = s.ipackets;
	out->opackets = s.opackets;
	out->ibytes = s.ibytes;
	out->obytes = s.obytes;
	out->imissed = s.imissed;
	out->ierrors = s.ierrors;
	out->oerrors = s.oerrors;
	out->rx_nombuf = s.rx_nombuf;
	return 0;
}

int lb_port_promisc(uint16_t port, int on)
{
	return on ? rte_eth_promiscuous_enable(port) : rte_eth_promiscuous_disable(port);
}

/* ---- Data path ---- */

struct lb_io *lb_io_new(uint16_t nports)
{
	size_t sz = RTE_ALIGN_CEIL(sizeof(struct lb_io), RTE_CACHE_LINE_SIZE);
	struct lb_io *io;

	/* rte_zmalloc: hugepage-backed when available (fewer TLB misses),
	 * on the calling thread's socket, cache-line aligned. */
	io = rte_zmalloc("lb_io", sz + (size_t)nports * sizeof(struct lb_txlist),
			 RTE_CACHE_LINE_SIZE);
	if (io == NULL)
		return NULL;
	io->nports = nports;
	io->tx = (struct lb_txlist *)((char *)io + sz);
	return io;
}

void lb_io_free(struct lb_io *io)
{
	uint16_t p;

	for (p = 0; p < io->nports; p++)
		rte_pktmbuf_free_bulk(io->tx[p].pkts, io->tx[p].n);
	rte_pktmbuf_free_bulk(io->drop, io->ndrop);
	rte_free(io);
}

/*
 * lb_io_run is the whole per-iteration I/O of a worker in one crossing:
 * transmit every pending tx list (the port owns what it took; the rest is
 * freed and counted), free the drop list, then receive the next burst.
 */
static inline void io_send(struct lb_io *io, uint16_t txq)
{
	uint16_t p;

	for (p = 0; p < io->nports; p++) {
		struct lb_txlist *l = &io->tx[p];
		uint16_t n = l->n, sent;

		if (n == 0)
			continue;
		sent = rte_eth_tx_burst(p, txq, l->pkts, n);
		if (unlikely(sent < n)) {
			rte_pktmbuf_free_bulk(&l->pkts[sent], n - sent);
			io->tx_dropped += n - sent;
		}
		l->n = 0;
	}
	if (io->ndrop) {
		rte_pktmbuf_free_bulk(io->drop, io->ndrop);
		io->ndrop = 0;
	}
}

uint16_t lb_io_run(struct lb_io *io, uint16_t rxport, uint16_t rxq, uint16_t txq)
{
	io_send(io, txq);
	io->nrx = rte_eth_rx_burst(rxport, rxq, io->rx, LB_MAX_BURST);
	return io->nrx;
}

/* lb_io_send is lb_io_run without the receive: the benchmark's latency probe. */
void lb_io_send(struct lb_io *io, uint16_t txq) { io_send(io, txq); }

/* ---- Rings ---- */

struct rte_ring *lb_ring_create(const char *name, uint32_t size, int socket, uint32_t flags,
				int *err)
{
	struct rte_ring *r = rte_ring_create(name, size, socket, flags);

	*err = r == NULL ? -rte_errno : 0;
	return r;
}

void lb_ring_free(struct rte_ring *r) { rte_ring_free(r); }

uint32_t lb_ring_enq(struct rte_ring *r, struct lb_burst b)
{
	if (b.n > LB_MAX_BURST)
		b.n = LB_MAX_BURST;
	return rte_ring_enqueue_burst(r, (void *const *)b.m, b.n, NULL);
}

struct lb_burst lb_ring_deq(struct rte_ring *r, uint32_t n)
{
	struct lb_burst b;

	if (n > LB_MAX_BURST)
		n = LB_MAX_BURST;
	b.n = rte_ring_dequeue_burst(r, (void **)b.m, n, NULL);
	b.rc = 0;
	return b;
}

uint32_t lb_ring_count(const struct rte_ring *r) { return rte_ring_count(r); }

/* lb_ring_port makes an ethdev port whose rx queue i dequeues from rx[i] and whose tx queue i
 * enqueues on tx[i] (the net_ring PMD); it returns the port id or -errno. */
int lb_ring_port(const char *name, struct rte_ring **rx, unsigned int nrx, struct rte_ring **tx,
		 unsigned int ntx, int socket)
{
	int rc = rte_eth_from_rings(name, rx, nrx, tx, ntx, socket);

	return rc < 0 ? -rte_errno : rc;
}

/* lb_vdev_uninit removes a virtual device (a ring port) from the vdev bus. */
int lb_vdev_uninit(const char *name) { return rte_vdev_uninit(name); }
