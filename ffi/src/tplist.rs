//! Topic-partition lists: the argument of assign, pause, resume, commit and committed, and what
//! rebalance callbacks receive.
use std::ffi::{c_char, CString};

use lagless::{Error, OffsetAndMetadata, TopicPartition};

use crate::boundary::{read, write_opt, write_out};
use crate::cast::{free_box, to_box};
use crate::error::{cstring_lossy, lagless_error};

/// "No offset": what a new entry holds, and what `lagless_consumer_committed` writes for a
/// partition without a committed offset.
pub const LAGLESS_OFFSET_INVALID: i64 = -1;

/// A list of (topic, partition, offset) entries. Owned by the caller (`lagless_tplist_new` /
/// `lagless_tplist_destroy`), except the lists passed to rebalance callbacks, which are borrowed
/// for the duration of the callback. Not synchronized: one thread at a time.
pub struct lagless_tplist {
    _private: [u8; 0],
}

castable! { lagless_tplist: Box<TpList> }

/// What a `lagless_tplist` points at.
#[derive(Default)]
pub(crate) struct TpList {
    pub(crate) items: Vec<TpEntry>,
}

pub(crate) struct TpEntry {
    pub topic: CString,
    pub tp: TopicPartition,
    pub offset: i64,
    /// Commit metadata: sent with a commit, filled in by `lagless_consumer_committed`.
    pub metadata: CString,
}

impl TpList {
    /// A list of `parts`, each with offset `LAGLESS_OFFSET_INVALID`.
    pub(crate) fn from_partitions(parts: impl IntoIterator<Item = TopicPartition>) -> TpList {
        TpList {
            items: parts.into_iter().map(TpEntry::new).collect(),
        }
    }

    pub(crate) fn partitions(&self) -> Vec<TopicPartition> {
        self.items.iter().map(|e| e.tp.clone()).collect()
    }

    /// The entries as commit offsets; each needs an offset >= 0.
    pub(crate) fn offsets(&self) -> Result<Vec<(TopicPartition, OffsetAndMetadata)>, Error> {
        self.items
            .iter()
            .map(|e| {
                if e.offset < 0 {
                    return Err(Error::InvalidArgument(format!(
                        "no offset set for {} in the commit list",
                        e.tp
                    )));
                }
                let metadata = e.metadata.to_str().map_err(|_| {
                    Error::InvalidArgument(format!("the commit metadata of {} is not UTF-8", e.tp))
                })?;
                Ok((
                    e.tp.clone(),
                    OffsetAndMetadata {
                        offset: e.offset,
                        metadata: metadata.to_string(),
                    },
                ))
            })
            .collect()
    }
}

impl TpEntry {
    fn new(tp: TopicPartition) -> TpEntry {
        TpEntry {
            topic: cstring_lossy(&tp.topic),
            tp,
            offset: LAGLESS_OFFSET_INVALID,
            metadata: CString::default(),
        }
    }
}

/// A new, empty list. Returns NULL only if lagless failed internally.
#[no_mangle]
pub extern "C" fn lagless_tplist_new() -> *mut lagless_tplist {
    ffi_panic_boundary! { to_box(TpList::default()) }
}

/// Appends (`topic`, `partition`) with offset `LAGLESS_OFFSET_INVALID`. The topic is copied.
#[no_mangle]
pub extern "C" fn lagless_tplist_add(
    list: *mut lagless_tplist,
    topic: *const c_char,
    partition: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let list = try_mut!(list);
        let topic = try_str!(topic);
        if topic.is_empty() {
            return Err(Error::InvalidArgument("`topic` is empty".into()));
        }
        if partition < 0 {
            return Err(Error::InvalidArgument(format!("partition must be >= 0, got {partition}")));
        }
        list.items.push(TpEntry::new(TopicPartition::new(topic, partition)));
        Ok(())
    }
}

/// The number of entries; 0 for NULL.
#[no_mangle]
pub extern "C" fn lagless_tplist_count(list: *const lagless_tplist) -> usize {
    read(list, |l| l.items.len())
}

fn out_of_range(index: usize, len: usize) -> Error {
    Error::InvalidArgument(format!(
        "index {index} is out of range: the list has {len} entries"
    ))
}

fn entry(list: &TpList, index: usize) -> Result<&TpEntry, Error> {
    let len = list.items.len();
    list.items
        .get(index)
        .ok_or_else(|| out_of_range(index, len))
}

fn entry_mut(list: &mut TpList, index: usize) -> Result<&mut TpEntry, Error> {
    let len = list.items.len();
    list.items
        .get_mut(index)
        .ok_or_else(|| out_of_range(index, len))
}

/// Entry `index`: its topic (borrowed from the list, valid until the list is destroyed),
/// partition and offset. Any out-parameter may be NULL if that part is not wanted.
#[no_mangle]
pub extern "C" fn lagless_tplist_get(
    list: *const lagless_tplist,
    index: usize,
    out_topic: *mut *const c_char,
    out_partition: *mut i32,
    out_offset: *mut i64,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let list = try_ref!(list);
        let e = entry(list, index)?;
        write_opt(out_topic, e.topic.as_ptr());
        write_opt(out_partition, e.tp.partition);
        write_opt(out_offset, e.offset);
        Ok(())
    }
}

/// Sets the offset of entry `index` (for commits: the offset of the next record to read).
#[no_mangle]
pub extern "C" fn lagless_tplist_set_offset(
    list: *mut lagless_tplist,
    index: usize,
    offset: i64,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let list = try_mut!(list);
        entry_mut(list, index)?.offset = offset;
        Ok(())
    }
}

/// Sets the commit metadata of entry `index` (copied; NULL clears it): a string the group keeps
/// beside the committed offset, up to the broker's `offset.metadata.max.bytes` (4096 by
/// default). With `enable.parallel.rebalance`, a commit of a partition whose recovery stream
/// still runs carries the recovery token instead (the offset is held at the low-water mark, see
/// `lagless_consumer_commit_sync`).
#[no_mangle]
pub extern "C" fn lagless_tplist_set_metadata(
    list: *mut lagless_tplist,
    index: usize,
    metadata: *const c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let list = try_mut!(list);
        let metadata = if metadata.is_null() { "" } else { try_str!(metadata) };
        entry_mut(list, index)?.metadata = cstring_lossy(metadata);
        Ok(())
    }
}

/// The commit metadata of entry `index` (empty when none): borrowed from the list, valid until
/// the list is destroyed or the entry's metadata is set again.
#[no_mangle]
pub extern "C" fn lagless_tplist_get_metadata(
    list: *const lagless_tplist,
    index: usize,
    out_metadata: *mut *const c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let list = try_ref!(list);
        try_out!(out_metadata);
        write_out(out_metadata, entry(list, index)?.metadata.as_ptr());
        Ok(())
    }
}

/// Frees a list the caller owns. NULL is ignored. Never call it on a list a callback received.
#[no_mangle]
pub extern "C" fn lagless_tplist_destroy(list: *mut lagless_tplist) {
    ffi_panic_boundary! { free_box(list) }
}
