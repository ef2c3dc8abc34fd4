-- agents-room on PostgreSQL, schema version 2: migrate_2.sql's columns (read it for their
-- meaning). Sessions of an older store keep host NULL: a host nobody recorded, judged as
-- another host's (alive by a recent call, else unknown), never by this host's /proc.
ALTER TABLE sessions ADD COLUMN host TEXT COLLATE "C";
ALTER TABLE sessions ADD COLUMN gone_at DOUBLE PRECISION;
UPDATE agents_room_meta SET value = '2' WHERE key = 'schema_version';
