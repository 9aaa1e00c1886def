//! The questions one detached execution's calls wait on: whoever waits on the execution (a
//! 2026-07-28 client's retry, a task's `tasks/get`) reads them here and passes them on.

use std::sync::{Arc, Mutex, PoisonError};

use super::question::Question;

/// How many of its questions' ids an inbox remembers.
const REMEMBERED: usize = 256;

/// The questions one detached execution's calls wait on, for whoever waits on it to pass on.
#[derive(Debug)]
pub struct Inbox {
    questions: Mutex<Vec<Arc<Question>>>,
    /// The ids of the questions asked lately, waiting or not (at most [`REMEMBERED`]): a late
    /// answer to one that lapsed or was withdrawn is let go, not refused as never asked.
    asked: Mutex<std::collections::VecDeque<String>>,
    /// Bumped whenever a question is asked, so a waiter wakes to pass it on.
    asking: tokio::sync::watch::Sender<u64>,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox {
            questions: Mutex::default(),
            asked: Mutex::default(),
            asking: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Inbox {
    /// Notes a question; whoever waits is woken.
    pub fn asked(&self, question: Arc<Question>) {
        {
            let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
            if asked.len() >= REMEMBERED {
                asked.pop_front();
            }
            asked.push_back(question.id.clone());
        }
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(question);
        self.asking.send_modify(|n| *n += 1);
    }

    /// Forgets question `id`: answered, expired or withdrawn.
    pub fn withdrawn(&self, id: &str) {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|q| q.id != id);
    }

    /// The questions waiting now, oldest first.
    pub fn questions(&self) -> Vec<Arc<Question>> {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|q| q.is_open())
            .cloned()
            .collect()
    }

    /// The ids of the questions asked lately, waiting or not.
    pub fn asked_lately(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// Wakes when a question is asked after this call.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.asking.subscribe()
    }
}
