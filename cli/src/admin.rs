//! `lagless topic ...` and `lagless group ...`: the admin client's calls, printed as tables.
use clap::Subcommand;
use lagless::admin::{AdminClient, GroupType, NewTopic, ResetTarget};

use crate::output::{cell, table};
use crate::settings::{parse_pair, parse_position, Position};
use crate::Common;

#[derive(Subcommand)]
pub enum TopicCommand {
    /// The cluster's topics, one per line.
    List {
        /// Include internal topics (__consumer_offsets).
        #[arg(long)]
        internal: bool,
    },
    /// Each partition's leader, replicas and in-sync replicas.
    Describe {
        /// The topics (repeat for more).
        #[arg(short = 't', long = "topic", required = true)]
        topics: Vec<String>,
    },
    /// Create a topic.
    Create {
        /// The topic's name.
        #[arg(short = 't', long)]
        topic: String,
        /// Its partition count (-1: the broker's num.partitions).
        #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
        partitions: i32,
        /// Its replication factor (-1: the broker's default.replication.factor).
        #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
        replication_factor: i16,
        /// A topic config, key=value (repeat for more).
        #[arg(long = "config", value_parser = parse_pair)]
        configs: Vec<(String, String)>,
    },
    /// Delete topics.
    Delete {
        /// The topics (repeat for more).
        #[arg(short = 't', long = "topic", required = true)]
        topics: Vec<String>,
    },
}

#[derive(Subcommand)]
pub enum GroupCommand {
    /// The cluster's groups, with their type and state.
    List,
    /// A group's state and members with their assignments.
    Describe {
        /// The group id.
        #[arg(short = 'g', long)]
        group: String,
    },
    /// Per partition: the group's committed offset, the log end offset, and the lag between.
    Lag {
        /// The group id.
        #[arg(short = 'g', long)]
        group: String,
    },
    /// Move a group's committed offsets; a dry run (shows the plan) unless --execute. Refused
    /// while the group has members.
    ResetOffsets {
        /// The group id.
        #[arg(short = 'g', long)]
        group: String,
        /// Reset every partition of these topics (repeat for more).
        #[arg(short = 't', long = "topic", required_unless_present = "all_topics")]
        topics: Vec<String>,
        /// Reset every partition the group has committed offsets for.
        #[arg(long, conflicts_with = "topics")]
        all_topics: bool,
        /// Where to: earliest, latest, offset:N (or N), timestamp:MS.
        #[arg(long, value_parser = parse_position)]
        to: Position,
        /// Commit the new offsets (without it nothing changes).
        #[arg(long)]
        execute: bool,
    },
}

fn client(common: &Common) -> Result<AdminClient, String> {
    AdminClient::new(&common.config()?).map_err(|e| e.to_string())
}

/// The first failed item of a per-item answer, as the command's error.
fn all_ok<K: std::fmt::Display>(
    results: Vec<(K, lagless::Result<()>)>,
    what: &str,
) -> Result<(), String> {
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|(k, r)| r.err().map(|e| format!("{what} {k}: {e}")))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

pub fn topic(common: &Common, command: &TopicCommand) -> Result<(), String> {
    let admin = client(common)?;
    let t = common.timeout();
    let e = |e: lagless::Error| e.to_string();
    match command {
        TopicCommand::List { internal } => {
            for name in admin.list_topics(*internal, t).map_err(e)? {
                println!("{name}");
            }
        }
        TopicCommand::Describe { topics } => {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            let mut rows = Vec::new();
            let mut failed = Vec::new();
            for (name, r) in admin.describe_topics(&names, t).map_err(e)? {
                match r {
                    Ok(d) => {
                        for p in d.partitions {
                            rows.push(vec![
                                name.clone(),
                                p.partition.to_string(),
                                p.leader.to_string(),
                                ids(&p.replicas),
                                ids(&p.isr),
                            ]);
                        }
                    }
                    Err(err) => failed.push(format!("topic {name}: {err}")),
                }
            }
            print!(
                "{}",
                table(&["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"], &rows)
            );
            if !failed.is_empty() {
                return Err(failed.join("; "));
            }
        }
        TopicCommand::Create {
            topic,
            partitions,
            replication_factor,
            configs,
        } => {
            let mut new = NewTopic::new(topic, *partitions, *replication_factor);
            new.configs = configs.clone();
            all_ok(admin.create_topics(&[new], t).map_err(e)?, "topic")?;
        }
        TopicCommand::Delete { topics } => {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            all_ok(admin.delete_topics(&names, t).map_err(e)?, "topic")?;
        }
    }
    Ok(())
}

/// The admin client's reset target for a `--to` position.
pub fn reset_target(p: Position) -> ResetTarget {
    match p {
        Position::Earliest => ResetTarget::Earliest,
        Position::Latest => ResetTarget::Latest,
        Position::Offset(o) => ResetTarget::Offset(o),
        Position::Timestamp(ts) => ResetTarget::Timestamp(ts),
    }
}

pub fn group(common: &Common, command: &GroupCommand) -> Result<(), String> {
    let admin = client(common)?;
    let t = common.timeout();
    let e = |e: lagless::Error| e.to_string();
    match command {
        GroupCommand::List => {
            let rows: Vec<Vec<String>> = admin
                .list_groups(t)
                .map_err(e)?
                .into_iter()
                .map(|g| vec![g.group_id, g.group_type, g.state])
                .collect();
            print!("{}", table(&["GROUP", "TYPE", "STATE"], &rows));
        }
        GroupCommand::Describe { group } => {
            let (_, r) = admin
                .describe_groups(&[group], t)
                .map_err(e)?
                .into_iter()
                .next()
                .ok_or("no answer for the group")?;
            let d = r.map_err(e)?;
            let kind = match d.group_type {
                GroupType::Classic => "classic",
                GroupType::Consumer => "consumer",
            };
            println!(
                "group {} ({kind} protocol): {}, assignor {}, {} member(s)",
                d.group_id,
                d.state,
                if d.assignor.is_empty() {
                    "-"
                } else {
                    &d.assignor
                },
                d.members.len()
            );
            let rows: Vec<Vec<String>> = d
                .members
                .into_iter()
                .map(|m| {
                    let assignment: Vec<String> =
                        m.assignment.iter().map(|tp| tp.to_string()).collect();
                    vec![
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        assignment.join(","),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                print!(
                    "{}",
                    table(&["MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"], &rows)
                );
            }
        }
        GroupCommand::Lag { group } => {
            let rows: Vec<Vec<String>> = admin
                .group_lag(group, t)
                .map_err(e)?
                .into_iter()
                .map(|l| {
                    vec![
                        l.partition.topic,
                        l.partition.partition.to_string(),
                        cell(l.committed),
                        cell(l.end),
                        cell(l.lag),
                    ]
                })
                .collect();
            print!(
                "{}",
                table(&["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"], &rows)
            );
        }
        GroupCommand::ResetOffsets {
            group,
            topics,
            all_topics: _,
            to,
            execute,
        } => {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            let plan = admin
                .plan_offset_reset(group, &names, reset_target(*to), t)
                .map_err(e)?;
            let rows: Vec<Vec<String>> = plan
                .iter()
                .map(|p| {
                    vec![
                        p.partition.topic.clone(),
                        p.partition.partition.to_string(),
                        cell(p.current),
                        p.target.to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table(&["TOPIC", "PARTITION", "CURRENT", "NEW"], &rows)
            );
            if *execute {
                let results = admin
                    .reset_consumer_group_offsets(group, &plan, t)
                    .map_err(e)?;
                all_ok(results, "partition")?;
            } else {
                eprintln!("dry run: nothing was changed (add --execute to commit these offsets)");
            }
        }
    }
    Ok(())
}
