//! memplan: static memory planning for the tensors of neural networks.
//!
//! The data model is tiny and everything else depends on it:
//! - [`Problem`]: buffers ([`Buffer`]) with a size, a half-open [`Lifetime`], an
//!   alignment, an optional fixed offset, plus explicit conflict pairs;
//! - [`Plan`]: one offset per buffer;
//! - [`checker`]: the independent judge of a plan, reporting every violation;
//! - [`bound`]: lower bounds on the arena (max-live);
//! - [`planner`]: the planners, each a named unit producing a `Plan`;
//! - [`io`]: minimalloc CSV and plan JSON;
//! - [`render`]: pictures of a plan (SVG, ASCII) for people.
//!
//! ```
//! use memplan::{Buffer, Problem, planner, checker, bound};
//! let problem = Problem::from_buffers(vec![
//!     Buffer::new("a", 4, 0, 3),
//!     Buffer::new("b", 4, 3, 9),
//!     Buffer::new("c", 4, 0, 9),
//! ]).unwrap();
//! let plan = planner::by_name("best-of").unwrap().plan(&problem).unwrap();
//! assert!(checker::check(&problem, &plan).is_valid());
//! assert_eq!(plan.arena_bytes, Some(8));
//! assert_eq!(bound::max_live(&problem).unwrap(), 8);
//! ```

pub mod bound;
pub mod checker;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod fxhash;
pub mod io;
pub mod orders;
pub mod plan;
pub mod planner;
pub mod problem;
mod radix;
pub mod render;

pub use plan::{Extent, Plan};
pub use problem::{Buffer, BufferId, Lifetime, Problem, ProblemError};
