//! smelt's integration tests, as modules of one test binary: the public API and the
//! command line, never the internals.

mod common;

mod activations;
mod bad_inputs;
mod bench;
mod cards;
mod cli;
mod cli_fit;
mod cli_inputs;
mod cli_match;
mod cli_output;
mod cli_plan;
mod doc_pointers;
mod docs;
mod figures;
mod fit;
mod hardening;
mod hardening_leftovers;
mod hardening_round3;
mod hf_export;
mod hf_figures;
mod hf_looped;
mod hf_reading;
mod hf_registry;
mod launcher;
mod launcher_flops;
mod llama4;
mod megatron;
mod parsers;
mod plot;
mod predict;
mod reference;
mod search;
mod search_ties;
mod search_time;
mod snapshots;
mod step_time;
mod structure;
mod training_memory;
mod validation;
