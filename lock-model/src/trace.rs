//! A counterexample as a trace of script calls, one line a step, that a
//! reader (or a test replaying it on a real server) can follow.

use std::fmt::Write;

use crate::model::{Action, Answer, Call, Grant, LeaseModel, Protocol, State};

/// `steps` (a path the checker found, as `Path::into_vec` gives it) as one
/// line a step: the tick, who acts, the script a server runs and its reply.
pub fn trace<P: Protocol>(
    model: &LeaseModel<P>,
    steps: &[(State<P::Server>, Option<Action>)],
) -> String {
    let mut text = String::new();
    for pair in steps.windows(2) {
        let [(before, Some(action)), (after, _)] = pair else {
            continue;
        };
        let _ = writeln!(
            text,
            "t={} {}",
            before.now,
            step(model, before, after, *action)
        );
    }
    if let Some((last, _)) = steps.last() {
        let _ = writeln!(text, "then: {}", summary(model, last));
    }
    text
}

fn answer(answer: Answer) -> String {
    match answer {
        Answer::Granted(granted) => format!("granted, {}", grant(granted)),
        Answer::TakenUp(granted) => format!(
            "takes up the grant to the earlier attempt, {}",
            grant(granted)
        ),
        Answer::Held => "held".to_owned(),
        Answer::Extended => "extended".to_owned(),
        Answer::NotHeld => "not held".to_owned(),
        Answer::Released => "released".to_owned(),
        Answer::TakenOver => "taken over".to_owned(),
        Answer::Refused => "refused, nothing written".to_owned(),
        Answer::Proclaimed => "proclaimed".to_owned(),
        Answer::Left => "left the line".to_owned(),
    }
}

fn step<P: Protocol>(
    model: &LeaseModel<P>,
    before: &State<P::Server>,
    after: &State<P::Server>,
    action: Action,
) -> String {
    let client = |id: u8| format!("client {id}");
    let script = |id: u8, op| model.protocol.script(id, op);
    match action {
        Action::Tick => {
            let (was, is) = (
                model.protocol.holds(&before.server).len(),
                model.protocol.holds(&after.server).len(),
            );
            match was.saturating_sub(is) {
                0 => "tick".to_owned(),
                1 => "tick; a hold expires".to_owned(),
                n => format!("tick; {n} holds expire"),
            }
        }
        Action::Restart => "the server restarts and loses every key".to_owned(),
        Action::Acquire(id)
        | Action::Extend(id, _)
        | Action::Release(id)
        | Action::Proclaim(id)
        | Action::GiveUp(id) => match after.clients[usize::from(id)].call {
            Some(Call::Sent(op, _)) => format!("{} sends {}", client(id), script(id, op)),
            _ => format!("{} {action:?}", client(id)),
        },
        Action::Run(id) => match after.clients[usize::from(id)].call {
            Some(Call::Answered(op, _, reply)) => {
                format!(
                    "server runs {} for {}: {}",
                    script(id, op),
                    client(id),
                    answer(reply)
                )
            }
            _ => {
                let op = match before.clients[usize::from(id)].call {
                    Some(Call::Sent(op, _)) => script(id, op),
                    _ => "its call".to_owned(),
                };
                format!("server runs {op} for crashed {}", client(id))
            }
        },
        Action::RunOrphan(id, op) => {
            let mut scratch = before.clone();
            let reply = model.run(&mut scratch, id, op);
            format!(
                "server runs {} for {}, who gave up on it or crashed: {}",
                script(id, op),
                client(id),
                answer(reply)
            )
        }
        Action::Reply(id) => match before.clients[usize::from(id)].call {
            Some(Call::Answered(_, _, reply)) => {
                let lease = after.clients[usize::from(id)].lease;
                match lease {
                    Some(lease) => format!(
                        "{} reads {}; trusts its lease until t={}",
                        client(id),
                        answer(reply),
                        lease.valid_until
                    ),
                    None => format!("{} reads {}", client(id), answer(reply)),
                }
            }
            _ => format!("{} reads a reply", client(id)),
        },
        Action::LoseReply(id) => format!("{}'s call fails (reply lost or timed out)", client(id)),
        Action::HandOff(id) => format!("{} hands its lease off as a token", client(id)),
        Action::ResumeToken(id, _) => match after.clients[usize::from(id)].call {
            Some(Call::Sent(op, _)) => format!("{} resumes: sends {}", client(id), script(id, op)),
            _ => format!("{} resumes a token", client(id)),
        },
        Action::Pause(id) => format!("{} pauses", client(id)),
        Action::Resume(id) => format!("{} resumes", client(id)),
        Action::Crash(id) => format!("{} crashes", client(id)),
        Action::Deliver(id, attempt) => match after.clients[usize::from(id)].lease {
            Some(lease) if before.clients[usize::from(id)].lease.is_none() => format!(
                "{} reads the message granting its attempt {attempt}; trusts it until t={}",
                client(id),
                lease.valid_until
            ),
            _ => format!(
                "{} reads the message granting its attempt {attempt}, and leaves it",
                client(id)
            ),
        },
        Action::LoseMessage(id, attempt) => {
            format!("the message granting client {id}'s attempt {attempt} is lost")
        }
    }
}

fn summary<P: Protocol>(model: &LeaseModel<P>, state: &State<P::Server>) -> String {
    let believers: Vec<String> = state
        .believers()
        .map(|(client, lease)| {
            format!(
                "client {client} trusts {} until t={}",
                grant(lease.grant),
                lease.valid_until
            )
        })
        .collect();
    let holds: Vec<String> = model
        .protocol
        .holds(&state.server)
        .into_iter()
        .map(|(client, attempt, held, expires)| {
            format!(
                "client {client}'s attempt {attempt} ({}) until t={expires}",
                grant(held)
            )
        })
        .collect();
    let counters: Vec<String> = model
        .protocol
        .counters(&state.server)
        .into_iter()
        .map(|(slot, last)| format!("slot {slot} at {last}"))
        .collect();
    let list = |items: Vec<String>, none: &str| {
        if items.is_empty() {
            none.to_owned()
        } else {
            items.join(", ")
        }
    };
    format!(
        "t={}: {}; the server holds {}; counters: {}",
        state.now,
        list(believers, "nobody trusts a lease"),
        list(holds, "nothing"),
        list(counters, "none"),
    )
}

fn grant(grant: Grant) -> String {
    if grant.slot == 0 {
        format!("token {}", grant.token)
    } else {
        format!("token {} in slot {}", grant.token, grant.slot)
    }
}
