//! Commit metadata comes from whoever committed last: another client, an older lagless, anyone
//! with access to the group. Parsing it must give a state or an error, never a panic, and a state
//! that parses must write a token that parses back to itself and fits the broker's limit.
#![no_main]

use lagless::recovery::{RecoveryState, MAX_TOKEN_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|s: &str| {
    if let Ok(st) = RecoveryState::parse_token(s) {
        assert!(st.validate().is_ok());
        let token = st.token();
        assert!(token.len() <= MAX_TOKEN_BYTES);
        assert!(token.len() <= s.len());
        let back = RecoveryState::parse_token(&token).expect("a written token parses");
        assert_eq!(back, st);
        assert_eq!(back.token(), token);
        // A takeover from it never moves the group's offset.
        let lwm = st.low_water_mark();
        let resumed = RecoveryState::on_assignment(lwm, Some(s), st.main_next.saturating_add(7), 3);
        assert_eq!(resumed.low_water_mark(), lwm);
    }
    // Whatever the metadata, the takeover starts at the committed offset.
    let resumed = RecoveryState::on_assignment(42, Some(s), 1000, 100);
    assert_eq!(resumed.low_water_mark(), 42);
});
