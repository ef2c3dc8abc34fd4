-- agents-room schema version 5: a lease records what the kernel calls its file when it was
-- claimed (store/paths.py's identities: "<device>:<inode>" of the file or directory, or of its
-- deepest existing folder with the rest of the path as written), so a claim, a check, drift
-- and the commit guard find it under the file's current name after a folder above it was
-- renamed, and under a second name of one inode (a hard link, a bind mount). NULL: a lease
-- granted before version 5, found by its path alone while it lives.
ALTER TABLE leases ADD COLUMN ident TEXT;
-- And whether the edit guard took it at an edit (store/editclaim.py) rather than the model by
-- lease_claim: 1 from such a claim, kept by renewals, 0 again once the holder claims the path
-- itself (then it is the model's lease, exactly as before). lease_list, lease_check and the
-- dashboard show it.
ALTER TABLE leases ADD COLUMN at_edit INTEGER NOT NULL DEFAULT 0;
CREATE INDEX leases_ident ON leases (ident);
