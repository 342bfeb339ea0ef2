// SPDX-License-Identifier: GPL-2.0

//! The memory a call lets the server reach, from registration to invalidation.
//!
//! A call whose chunks the protocol core planned ([`plan_v1`]) registers the bytes behind
//! them: its bulk data for a Read chunk, the whole call for a Position Zero Read chunk, the
//! reply's page data for a Write chunk or the whole reply buffer for a Reply chunk. Each
//! piece is a [`Region`]: pages of the call's own buffers mapped for the device
//! ([`MappedPages`]) and a fast-registration MR over them, whose key and address go on the
//! wire as one segment. No byte is copied.
//!
//! A call's regions form its [`Record`], kept by the endpoint under the call's XID until
//! every region is invalid again, which a completed `LOCAL_INV` proves, or the reply's Send
//! if it was a Send With Invalidate of the region (RFC 8166, section 3.4.7: the Requester
//! invalidates before it uses the memory; RFC 8797 and Version 2's `rdma_inv_handle` let the
//! Responder do it for one region). So:
//!
//! - when the reply arrives, the region its Send invalidated, if any, is done with at once (an
//!   invalidation of anything but a region of that call breaks the connection: the peer
//!   invalidated memory it had no business with); its receive buffer is held (not posted
//!   again) while the `LOCAL_INV`s of the other regions run, and the reply is delivered to the
//!   call only once the last one completed (at once without any), with the pages unmapped;
//! - when a call ends before its reply (a signal, a timeout), freeing its buffers
//!   ([`Endpoint::release_call`](super::endpoint::Endpoint::release_call)) invalidates and
//!   waits, so no page goes back to its owner while the server may still write it;
//! - a region whose invalidation failed belongs to a connection that is gone: its MR keeps
//!   the pages until the endpoint, and so the queue pair, is dropped.
//!
//! MRs come from a per-endpoint pool, allocated on first use up to [`MAX_MRS`]; an MR returns
//! to the pool only after its invalidation completed.
//!
//! [`plan_v1`]: crate::proto::call_plan::plan_v1

use super::MAX_REQUESTS;
use crate::proto::{
    call_plan::{CallLayout, CallPlan, ReplyPlacement},
    remote_invalidation::invalidated_region,
    xid_table::{InsertError, XidTable},
};
use core::ops::Range;
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rdma::{
        consumer::{
            client::ProtectionDomain, fast_reg::FastRegMr, kernel_qp::RemoteInvalidation,
            mapped_pages::MappedPages,
        },
        fixed_ring::FixedRing,
    },
    sync::{Arc, CondVar, Mutex},
};

/// Regions one call may have: a Position Zero Read chunk or a Reply chunk takes up to four
/// (head, page data in two pieces, tail).
pub(crate) const MAX_REGIONS: usize = 8;

/// Pages one region maps at most (the C siw's and rsiw's fast-registration limit; a device
/// with a lower one sets the endpoint's).
pub(crate) const REGION_PAGES: u32 = 256;

/// Records an endpoint keeps: one per call in flight, as many again for calls ended early
/// whose invalidation runs.
pub(crate) const RECORDS: usize = 2 * MAX_REQUESTS as usize;

/// MRs an endpoint allocates at most.
pub(crate) const MAX_MRS: usize = 4 * MAX_REQUESTS as usize;

/// One registered piece of a call's memory.
pub(crate) struct Region {
    pub(crate) mr: Arc<FastRegMr>,
    /// The pages; unmapped once both this and the MR's registration let go of them.
    pub(crate) pages: Arc<MappedPages>,
}

/// How a reply is to be delivered once its call's regions are invalid.
#[derive(Debug)]
pub(crate) enum ReplyKind {
    /// `RDMA_MSG`: the inline payload (bytes `payload` of the message) and where the bulk
    /// data went.
    Msg {
        payload: Range<usize>,
        placement: ReplyPlacement,
    },
    /// `RDMA_NOMSG`: the whole reply, `len` bytes, came through the Reply chunk.
    NoMsg { len: usize },
    /// A continued reply (Version 2): its reassembled inline payload, copied out of the
    /// endpoint's reassembly buffer (whose receive buffers are posted again already), and
    /// where the bulk data went.
    Continued {
        payload: KVec<u8>,
        placement: ReplyPlacement,
    },
    /// `RDMA_ERROR`, or a reply that does not fit its call: the call fails.
    Failed,
}

/// A reply waiting for its call's invalidations, in receive buffer `recv_index` (none for a
/// continued reply: its payload is in its [`ReplyKind`]).
#[derive(Debug)]
pub(crate) struct HeldReply {
    pub(crate) recv_index: Option<usize>,
    pub(crate) len: usize,
    pub(crate) kind: ReplyKind,
}

/// Where a record stands.
enum Stage {
    /// The server may reach the regions.
    Registered,
    /// `pending` invalidations are in flight; then the reply, if any, is delivered.
    Invalidating {
        pending: usize,
        reply: Option<HeldReply>,
    },
}

/// The registered memory of one call (its XID is its entry's in `by_xid`).
pub(crate) struct Record {
    pub(crate) layout: CallLayout,
    pub(crate) plan: CallPlan,
    regions: KVec<Region>,
    stage: Stage,
}

/// Where [`Registrations::invalidate`] left a record.
pub(crate) enum Invalidating {
    /// `LOCAL_INV`s were posted; the last one's completion finishes the record.
    Posted,
    /// No region needed one: the record is finished.
    Done(Finished),
}

/// What finished with a record: its call's reply, if one is held, now to be delivered.
pub(crate) struct Finished {
    pub(crate) xid: u32,
    pub(crate) reply: Option<HeldReply>,
}

/// # Invariants
///
/// `by_xid` has an entry at index `i` exactly when `records[i]` holds a record, under that
/// record's XID.
struct Inner {
    records: KVec<Option<Record>>,
    by_xid: XidTable<RECORDS>,
    free_mrs: FixedRing<Arc<FastRegMr>>,
    allocated_mrs: usize,
}

/// The records and MR pool of one endpoint, shared by its sender and its completion handler.
#[pin_data]
pub(crate) struct Registrations {
    #[pin]
    inner: Mutex<Inner>,
    /// Told whenever a record goes.
    #[pin]
    settled: CondVar,
}

impl Registrations {
    pub(crate) fn new() -> Result<impl PinInit<Self, Error>> {
        let mut records = KVec::with_capacity(RECORDS, GFP_KERNEL)?;
        for _ in 0..RECORDS {
            records.push(None, GFP_KERNEL)?;
        }
        let free_mrs = FixedRing::new(MAX_MRS, GFP_KERNEL)?;
        Ok(try_pin_init!(Self {
            inner <- new_mutex!(Inner {
                records,
                by_xid: XidTable::new(),
                free_mrs,
                allocated_mrs: 0,
            }),
            settled <- new_condvar!(),
        }? Error))
    }

    /// Takes `count` MRs from the pool, allocating what it lacks (up to [`MAX_MRS`] in all).
    /// `ENOBUFS` if the pool is exhausted (the call is sent again later). Returns how many
    /// were newly allocated.
    pub(crate) fn take_mrs(
        &self,
        pd: &Arc<ProtectionDomain>,
        pages: u32,
        count: usize,
        out: &mut KVec<Arc<FastRegMr>>,
    ) -> Result<usize> {
        let missing = {
            let mut inner = self.inner.lock();
            let have = inner.free_mrs.len().min(count);
            let missing = count - have;
            if inner.allocated_mrs + missing > MAX_MRS {
                return Err(ENOBUFS);
            }
            for _ in 0..have {
                if let Some(mr) = inner.free_mrs.pop() {
                    out.push(mr, GFP_KERNEL)?;
                }
            }
            inner.allocated_mrs += missing;
            missing
        };
        for done in 0..missing {
            match FastRegMr::new(pd, pages) {
                Ok(mr) => out.push(mr, GFP_KERNEL)?,
                Err(e) => {
                    self.inner.lock().allocated_mrs -= missing - done;
                    return Err(e);
                }
            }
        }
        Ok(missing)
    }

    /// Gives back MRs that were never registered, or whose registration was invalidated.
    pub(crate) fn put_mrs(&self, mrs: impl IntoIterator<Item = Arc<FastRegMr>>) {
        let mut inner = self.inner.lock();
        for mr in mrs {
            // Cannot fail: the pool's capacity is every MR there is.
            let _ = inner.free_mrs.push(mr);
        }
    }

    /// Reserves a record for call `xid`; returns its index. `EEXIST` if the call already has
    /// one (it was sent on this connection before), `ENOBUFS` if all are in use.
    pub(crate) fn reserve(&self, xid: u32, layout: CallLayout, plan: CallPlan) -> Result<usize> {
        let regions = KVec::with_capacity(MAX_REGIONS, GFP_KERNEL)?;
        let mut inner = self.inner.lock();
        let index = inner.by_xid.insert(xid).map_err(|e| match e {
            InsertError::Present => EEXIST,
            InsertError::Full => ENOBUFS,
        })?;
        let Some(slot) = inner.records.get_mut(index) else {
            inner.by_xid.remove(index);
            return Err(EINVAL);
        };
        *slot = Some(Record {
            layout,
            plan,
            regions,
            stage: Stage::Registered,
        });
        Ok(index)
    }

    /// Adds a region, about to be registered, to record `index`.
    pub(crate) fn add_region(&self, index: usize, region: Region) -> Result {
        let mut inner = self.inner.lock();
        let record = inner
            .records
            .get_mut(index)
            .and_then(Option::as_mut)
            .ok_or(EINVAL)?;
        if record.regions.len() >= MAX_REGIONS {
            return Err(EMSGSIZE);
        }
        record.regions.push(region, GFP_KERNEL)?;
        Ok(())
    }

    /// Drops record `index` of a call whose regions were never registered, and gives its MRs
    /// back.
    pub(crate) fn discard_unregistered(&self, index: usize) {
        let record = Self::take(&mut self.inner.lock(), index);
        if let Some((_, record)) = record {
            self.put_mrs(record.regions.into_iter().map(|r| r.mr));
        }
        self.settled.notify_all();
    }

    /// The record of call `xid`, if it has one: its index, and its layout and plan while it is
    /// still registered (`None` once its invalidation started).
    pub(crate) fn lookup(&self, xid: u32) -> Option<(usize, Option<(CallLayout, CallPlan)>)> {
        let inner = self.inner.lock();
        let index = inner.by_xid.find(xid)?;
        let r = inner.records.get(index)?.as_ref()?;
        Some((
            index,
            matches!(r.stage, Stage::Registered).then_some((r.layout, r.plan)),
        ))
    }

    /// Takes record `index` out, with its entry in `by_xid`; returns its XID and it.
    fn take(inner: &mut Inner, index: usize) -> Option<(u32, Record)> {
        let xid = inner.by_xid.xid(index)?;
        let record = inner.records.get_mut(index)?.take()?;
        inner.by_xid.remove(index);
        Some((xid, record))
    }

    /// Starts invalidating record `index` (it must be registered), holding `reply` until the
    /// end. `remote` is the proof that the reply's Send invalidated one of its regions: that
    /// one's registration ends here (`EPROTO`, and nothing changes, if it is none of the
    /// record's regions). Passes each other region's MR to `post` (which posts its
    /// `LOCAL_INV`). If `post` fails, the connection is gone: the record is finished without
    /// its regions (their MRs keep the pages until the endpoint goes), the reply dropped.
    pub(crate) fn invalidate(
        &self,
        index: usize,
        reply: Option<HeldReply>,
        remote: Option<&RemoteInvalidation>,
        mut post: impl FnMut(&Arc<FastRegMr>) -> Result,
    ) -> Result<Invalidating> {
        let mut inner = self.inner.lock();
        let Some(record) = inner.records.get_mut(index).and_then(Option::as_mut) else {
            return Err(EINVAL);
        };
        if !matches!(record.stage, Stage::Registered) {
            return Err(EALREADY);
        }
        let remote_region = match remote {
            Some(proof) => {
                let handles = record.regions.iter().map(|r| r.mr.rkey());
                let region = invalidated_region(proof.rkey(), handles).ok_or(EPROTO)?;
                let ended = record
                    .regions
                    .get(region)
                    .is_some_and(|r| r.mr.remotely_invalidated(proof));
                // The key is the region's current one: its registration ended.
                if !ended {
                    return Err(EPROTO);
                }
                Some(region)
            }
            None => None,
        };
        let mut posted = 0;
        let mut failed = None;
        for (i, region) in record.regions.iter().enumerate() {
            if Some(i) == remote_region {
                continue;
            }
            if let Err(e) = post(&region.mr) {
                failed = Some(e);
                break;
            }
            posted += 1;
        }
        record.stage = Stage::Invalidating {
            pending: posted,
            reply,
        };
        if let Some(e) = failed {
            // Completions of what was posted find the record gone and change nothing.
            if let Some((_, record)) = Self::take(&mut inner, index) {
                inner.allocated_mrs = inner.allocated_mrs.saturating_sub(record.regions.len());
            }
            drop(inner);
            self.settled.notify_all();
            return Err(e);
        }
        if posted > 0 {
            return Ok(Invalidating::Posted);
        }
        let finished = Self::finish(&mut inner, index).ok_or(EINVAL)?;
        drop(inner);
        self.settled.notify_all();
        Ok(Invalidating::Done(finished))
    }

    /// Whether a region of record `index` is registered under `rkey`.
    pub(crate) fn has_region(&self, index: usize, rkey: u32) -> bool {
        let inner = self.inner.lock();
        inner
            .records
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|r| r.regions.iter().any(|region| region.mr.rkey() == rkey))
    }

    /// Finishes record `index`, all of whose regions are invalid: its MRs return to the pool,
    /// its pages are unmapped (once the registrations let go of them too), and what it held is
    /// returned.
    fn finish(inner: &mut Inner, index: usize) -> Option<Finished> {
        let (xid, Record { regions, stage, .. }) = Self::take(inner, index)?;
        let mut reply = None;
        if let Stage::Invalidating { reply: held, .. } = stage {
            reply = held;
        }
        for region in regions {
            // Its registration ended (a `LOCAL_INV` completed, or the peer's Send With
            // Invalidate): the queue pair let go of the pages; ours goes here, which unmaps
            // them.
            drop(region.pages);
            // Cannot fail: the pool's capacity is every MR there is.
            let _ = inner.free_mrs.push(region.mr);
        }
        Some(Finished { xid, reply })
    }

    /// One `LOCAL_INV` of record `index` completed (`ok`: successfully). When the record has
    /// none pending any more it goes: its MRs return to the pool, its pages are unmapped, and
    /// what it held is returned. A failed invalidation ends the record at once, without its
    /// reply: the connection is gone, and its MRs, which may still be valid, go with it.
    pub(crate) fn invalidated(&self, index: usize, ok: bool) -> Option<Finished> {
        let mut inner = self.inner.lock();
        let record = inner.records.get_mut(index)?.as_mut()?;
        let Stage::Invalidating { pending, .. } = &mut record.stage else {
            return None;
        };
        *pending = pending.saturating_sub(1);
        if *pending > 0 && ok {
            return None;
        }
        let finished = if ok {
            Self::finish(&mut inner, index)
        } else {
            let (xid, Record { regions, .. }) = Self::take(&mut inner, index)?;
            inner.allocated_mrs = inner.allocated_mrs.saturating_sub(regions.len());
            drop(regions);
            Some(Finished { xid, reply: None })
        };
        drop(inner);
        self.settled.notify_all();
        finished
    }

    /// Waits until call `xid` has no record any more.
    pub(crate) fn wait_gone(&self, xid: u32) {
        let mut inner = self.inner.lock();
        while inner.by_xid.find(xid).is_some() {
            self.settled.wait(&mut inner);
        }
    }
}
