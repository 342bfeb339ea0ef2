// SPDX-License-Identifier: GPL-2.0

#include <net/sock.h>
#include <net/ipv6.h>

/* A socket's sk_callback_lock, as socket callbacks and their installers take it. */
void rust_helper_sk_callback_read_lock(struct sock *sk)
{
	read_lock(&sk->sk_callback_lock);
}

void rust_helper_sk_callback_read_unlock(struct sock *sk)
{
	read_unlock(&sk->sk_callback_lock);
}

void rust_helper_sk_callback_write_lock_bh(struct sock *sk)
{
	write_lock_bh(&sk->sk_callback_lock);
}

void rust_helper_sk_callback_write_unlock_bh(struct sock *sk)
{
	write_unlock_bh(&sk->sk_callback_lock);
}

int rust_helper_sk_state_read(const struct sock *sk)
{
	return READ_ONCE(sk->sk_state);
}

/* Whether a stream socket has room for more to send, as its write_space wakers judge it. */
bool rust_helper_sk_stream_is_writeable(const struct sock *sk)
{
	return sk_stream_is_writeable(sk);
}

/*
 * What a socket's default sk_state_change does: wake everyone sleeping on it. Used for
 * sockets whose callbacks were cloned from a listener but carry no handler.
 */
void rust_helper_sk_wake_all(struct sock *sk)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_all(&wq->wait);
	rcu_read_unlock();
}

int rust_helper_ip6_sock_set_v6only(struct sock *sk)
{
	return ip6_sock_set_v6only(sk);
}

/* A socket buffer's shared info (after its data; where depends on the build). */
struct skb_shared_info *rust_helper_skb_shinfo(const struct sk_buff *skb)
{
	return skb_shinfo(skb);
}

/* The page of a socket buffer's fragment, NULL if it is not a page (a net_iov). */
struct page *rust_helper_skb_frag_page(const skb_frag_t *frag)
{
	return skb_frag_page(frag);
}

/* The kernel mapping of a page that has one (all of them without CONFIG_HIGHMEM). */
void *rust_helper_page_address(const struct page *page)
{
	return page_address(page);
}

/* Pages TCP takes by reference (MSG_SPLICE_PAGES). */
bool rust_helper_virt_addr_valid(const void *addr)
{
	return virt_addr_valid(addr);
}

struct page *rust_helper_virt_to_page(const void *addr)
{
	return virt_to_page(addr);
}

bool rust_helper_sendpage_ok(struct page *page)
{
	return sendpage_ok(page);
}

void rust_helper_get_page(struct page *page)
{
	get_page(page);
}

void rust_helper_put_page(struct page *page)
{
	put_page(page);
}

/* A socket option value in kernel memory, for tcp_setsockopt(). */
sockptr_t rust_helper_KERNEL_SOCKPTR(void *p)
{
	return KERNEL_SOCKPTR(p);
}
