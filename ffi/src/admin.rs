//! Topic creation, so C programs and tests need no other Kafka tool.
use std::ffi::c_char;

use lagless::Error;

use crate::error::lagless_error;

/// Creates topic `name` with `partitions` partitions and replication factor
/// `replication_factor` on the cluster at `bootstrap` ("host:port[,host:port...]"), and waits
/// (up to 30 s) until every partition has a leader. A topic that exists already gives
/// `LAGLESS_ERR_KAFKA` with `lagless_error_kafka_code` 36 (TOPIC_ALREADY_EXISTS). Blocking;
/// thread-safety: any thread.
#[no_mangle]
pub extern "C" fn lagless_admin_create_topic(
    bootstrap: *const c_char,
    name: *const c_char,
    partitions: i32,
    replication_factor: i16,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let bootstrap = try_str!(bootstrap);
        let name = try_str!(name);
        if name.is_empty() {
            return Err(Error::InvalidArgument("`name` is empty".into()));
        }
        if partitions < 1 || replication_factor < 1 {
            return Err(Error::InvalidArgument(format!(
                "partitions ({partitions}) and replication_factor ({replication_factor}) must be >= 1"
            )));
        }
        lagless::admin::create_topic(bootstrap, name, partitions, replication_factor)
    }
}
