//! The Metadata request: the topics to describe (or all of them), never creating any. Pure;
//! `crate::cluster` sends it and keeps what the answer says.
use crate::protocol::msg::metadata_request::MetadataRequestTopic;
use crate::protocol::msg::{MetadataRequest, StrBytes, TopicName};

/// Metadata of `topics`, or of every topic when `all` (a pattern subscription). Auto-creation is
/// always off: lagless never creates a topic by asking about it.
pub(crate) fn metadata<'a>(
    topics: impl IntoIterator<Item = &'a String>,
    all: bool,
) -> MetadataRequest {
    let topics = (!all).then(|| {
        topics
            .into_iter()
            .map(|t| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
            })
            .collect()
    });
    MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_topics_or_all_and_never_auto_creation() {
        let req = metadata(&["a".to_string(), "b".to_string()], false);
        let names: Vec<&str> = req
            .topics
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| t.name.as_ref().unwrap().0.as_str())
            .collect();
        assert_eq!(names, vec!["a", "b"]);
        assert!(!req.allow_auto_topic_creation);
        // All topics is a null list; an empty list would ask for none.
        let all = metadata(&["a".to_string()], true);
        assert!(all.topics.is_none());
        assert!(!all.allow_auto_topic_creation);
        assert_eq!(metadata(&[], false).topics.map(|t| t.len()), Some(0));
    }
}
