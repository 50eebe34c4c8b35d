//! Topic-partition lists: the argument of assign, pause, resume, commit and committed, and what
//! rebalance callbacks receive.
use std::ffi::{c_char, CString};

use lagless::{Error, OffsetAndMetadata, TopicPartition};

use crate::boundary::write_opt;
use crate::error::{cstring_lossy, lagless_error};

/// "No offset": what a new entry holds, and what `lagless_consumer_committed` writes for a
/// partition without a committed offset.
pub const LAGLESS_OFFSET_INVALID: i64 = -1;

/// A list of (topic, partition, offset) entries. Owned by the caller (`lagless_tplist_new` /
/// `lagless_tplist_destroy`), except the lists passed to rebalance callbacks, which are borrowed
/// for the duration of the callback. Not synchronized: one thread at a time.
pub struct lagless_tplist {
    pub(crate) items: Vec<TpEntry>,
}

pub(crate) struct TpEntry {
    pub topic: CString,
    pub tp: TopicPartition,
    pub offset: i64,
}

impl lagless_tplist {
    pub(crate) fn from_partitions(parts: &[TopicPartition]) -> lagless_tplist {
        lagless_tplist {
            items: parts
                .iter()
                .map(|tp| TpEntry {
                    topic: cstring_lossy(&tp.topic),
                    tp: tp.clone(),
                    offset: LAGLESS_OFFSET_INVALID,
                })
                .collect(),
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
                Ok((
                    e.tp.clone(),
                    OffsetAndMetadata {
                        offset: e.offset,
                        metadata: String::new(),
                    },
                ))
            })
            .collect()
    }
}

/// A new, empty list. Returns NULL only if lagless failed internally.
#[no_mangle]
pub extern "C" fn lagless_tplist_new() -> *mut lagless_tplist {
    ffi_panic_boundary! {
        Box::into_raw(Box::new(lagless_tplist { items: Vec::new() }))
    }
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
        list.items.push(TpEntry {
            topic: cstring_lossy(topic),
            tp: TopicPartition::new(topic, partition),
            offset: LAGLESS_OFFSET_INVALID,
        });
        Ok(())
    }
}

/// The number of entries; 0 for NULL.
#[no_mangle]
pub extern "C" fn lagless_tplist_count(list: *const lagless_tplist) -> usize {
    ffi_panic_boundary! {
        // SAFETY: the header requires NULL or a live list.
        unsafe { list.as_ref() }.map_or(0, |l| l.items.len())
    }
}

fn entry(list: &lagless_tplist, index: usize) -> Result<&TpEntry, Error> {
    list.items.get(index).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "index {index} is out of range: the list has {} entries",
            list.items.len()
        ))
    })
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
        let len = list.items.len();
        let e = list.items.get_mut(index).ok_or_else(|| {
            Error::InvalidArgument(format!("index {index} is out of range: the list has {len} entries"))
        })?;
        e.offset = offset;
        Ok(())
    }
}

/// Frees a list the caller owns. NULL is ignored. Never call it on a list a callback received.
#[no_mangle]
pub extern "C" fn lagless_tplist_destroy(list: *mut lagless_tplist) {
    ffi_panic_boundary! {
        if !list.is_null() {
            // SAFETY: `list` came from lagless_tplist_new (or an owned result) and is destroyed once.
            drop(unsafe { Box::from_raw(list) });
        }
    }
}
