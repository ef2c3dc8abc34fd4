-- agents-room schema version 6: a lease records its file's name in its folder beside its own
-- identity (store/paths.py's recorded: "<folder device:inode>/<name>", for a file or directory
-- that exists when it is claimed). Every editor saves a file by rename, a new inode: the
-- identity of version 5 then names no file, while the folder keeps its inode through a rename
-- of the folder (a symlink left in its place), so a claim, a check, drift and the commit guard
-- find the lease under its file's new name by either. NULL: a lease granted before version 6,
-- or of a name not created yet (its ident is that form already), found as before.
ALTER TABLE leases ADD COLUMN name_ident TEXT;
CREATE INDEX leases_name_ident ON leases (name_ident);
-- And where a session's paths are read (store/paths.py's view: "<kernel boot id>/<mount namespace
-- inode>" of the process that joined it), so a match by identity knows when the holder's path
-- cannot be looked at from the caller's view (a container's own mount of the checkout) and
-- when its numbers are another kernel's. NULL: joined before version 6, judged as before.
ALTER TABLE sessions ADD COLUMN view TEXT;
