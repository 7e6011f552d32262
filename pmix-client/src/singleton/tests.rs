//! A singleton's answers, through the client's public calls: no server, no processes.
