//! `lagless`: consume and produce records, manage topics, and see and reset consumer groups'
//! offsets, from the command line. Options follow kcat's: `-b` brokers, `-X key=value` (any
//! lagless setting, Java key names), `-F file` (key=value lines).
//!
//! Errors are one line on stderr and exit status 1 (2 for a usage error); nothing panics.
//!
//! The binary (`src/main.rs`) and the Python package's `lagless` console script both call
//! [`run`]; nothing else of this crate is public.
mod admin;
mod consume;
mod output;
mod produce;
mod settings;
mod verifiable;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;
use crate::settings::Position;

#[derive(Parser)]
#[command(
    name = "lagless",
    version,
    about = "Consume, produce, and manage topics and consumer groups of a Kafka cluster"
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

/// The options every command takes.
#[derive(Args, Clone)]
pub(crate) struct Common {
    /// The brokers to bootstrap from (host:port,...); sets bootstrap.servers.
    #[arg(short = 'b', long = "bootstrap-servers", global = true)]
    pub bootstrap: Option<String>,
    /// A client setting, key=value (Java key names; repeat for more). Applied after -F.
    #[arg(short = 'X', value_name = "KEY=VALUE", global = true, value_parser = settings::parse_pair)]
    pub settings: Vec<(String, String)>,
    /// A file of key=value lines (client settings), applied before -X.
    #[arg(short = 'F', long = "config-file", value_name = "FILE", global = true)]
    pub config_file: Option<PathBuf>,
    /// How long an admin call may take, in seconds.
    #[arg(long, default_value_t = 30, global = true)]
    pub timeout: u64,
}

impl Common {
    pub(crate) fn config(&self) -> Result<lagless::Config, String> {
        let file = match &self.config_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading config file {}: {e}", path.display()))?;
                settings::parse_config_file(&text)
                    .map_err(|e| format!("config file {}: {e}", path.display()))?
            }
            None => Vec::new(),
        };
        let c = settings::build_config(&file, &self.settings, self.bootstrap.as_deref())
            .map_err(|e| e.to_string())?;
        if !c.is_set("bootstrap.servers") {
            return Err("no brokers given: use -b host:port (or -X bootstrap.servers=...)".into());
        }
        Ok(c)
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

#[derive(Subcommand)]
enum Command {
    /// List, describe, create or delete topics.
    #[command(subcommand)]
    Topic(admin::TopicCommand),
    /// List, describe consumer groups, show their lag, reset their offsets.
    #[command(subcommand)]
    Group(admin::GroupCommand),
    /// Read records and print them on stdout.
    Consume(ConsumeArgs),
    /// Write records read from stdin (or files), one per line.
    Produce(ProduceArgs),
    /// Kafka's VerifiableProducer: its flags, its JSON events on stdout (for Kafka's system
    /// tests and harnesses built for them).
    #[command(name = "verifiable-producer")]
    VerifiableProducer(verifiable::ProducerArgs),
    /// Kafka's VerifiableConsumer: its flags, its JSON events on stdout.
    #[command(name = "verifiable-consumer")]
    VerifiableConsumer(verifiable::ConsumerArgs),
}

#[derive(Args)]
pub(crate) struct ConsumeArgs {
    /// The topic to read.
    #[arg(short = 't', long)]
    pub topic: String,
    /// Read as a member of this consumer group (committing what was printed).
    #[arg(short = 'g', long, conflicts_with = "partitions")]
    pub group: Option<String>,
    /// Read these partitions (comma-separated) without a group; default: all of them.
    #[arg(short = 'p', long, value_delimiter = ',')]
    pub partitions: Vec<i32>,
    /// Where to start: earliest, latest, offset:N (or N), timestamp:MS. With -g it applies
    /// where the group has no committed offset (earliest or latest only).
    #[arg(long, value_parser = settings::parse_position)]
    pub from: Option<Position>,
    /// Stop after this many records.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop once no record came for this many milliseconds.
    #[arg(short = 'e', long = "exit-idle-ms")]
    pub exit_idle_ms: Option<u64>,
    /// How to print each record.
    #[arg(long, value_enum, default_value_t = Format::Value)]
    pub format: Format,
}

#[derive(Args)]
pub(crate) struct ProduceArgs {
    /// The topic to write to.
    #[arg(short = 't', long)]
    pub topic: String,
    /// Read the records from these files instead of stdin (one record per line).
    #[arg(short = 'f', long = "file")]
    pub files: Vec<PathBuf>,
    /// Split each line at the first occurrence of this into key and value.
    #[arg(short = 'k', long = "key-separator")]
    pub key_separator: Option<String>,
    /// A header for every record, name=value (repeat for more).
    #[arg(short = 'H', long = "header", value_parser = settings::parse_pair)]
    pub headers: Vec<(String, String)>,
    /// Write every record to this partition (default: the partitioner's choice).
    #[arg(short = 'p', long)]
    pub partition: Option<i32>,
    /// Compression codec: none, gzip, snappy, lz4, zstd (sets compression.type).
    #[arg(short = 'z', long)]
    pub compression: Option<String>,
}

/// Runs the tool with `args` (the program name first, as `std::env::args_os()` gives them) and
/// returns its exit status: 0, 1 for an error (one line on stderr), 2 for a usage error.
pub fn run(args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" with exit status 0, printed on stdout.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let result = match &cli.command {
        Command::Topic(c) => admin::topic(&cli.common, c),
        Command::Group(c) => admin::group(&cli.common, c),
        Command::Consume(a) => consume::run(&cli.common, a),
        Command::Produce(a) => produce::run(&cli.common, a),
        Command::VerifiableProducer(a) => verifiable::produce(a),
        Command::VerifiableConsumer(a) => verifiable::consume(a),
    };
    match result {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("lagless: error: {message}");
            1
        }
    }
}
