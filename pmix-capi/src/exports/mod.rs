//! The exported C functions, one file per group of the Standard's API. Each runs its body
//! through `guard`, reads its arguments through `convert`, and calls the safe client.
//! Their contracts are the Standard's (pointers valid for their counts, strings
//! NUL-terminated), so they carry no `# Safety` sections of their own.
#![allow(clippy::missing_safety_doc, non_snake_case)]

pub mod argv;
pub mod buffer;
mod completion;
pub mod control;
pub mod data;
pub mod dynamic;
pub mod events;
pub mod groups;
pub mod info_flags;
pub mod info_list;
pub mod iof;
pub mod lifecycle;
pub mod names;
pub mod naming;
pub mod regex;
pub mod resolve;
pub mod strings;
pub mod structs;
pub mod tool;
pub mod topology;
pub mod unsupported;
pub mod values;
